import pytest
from bertha_helpers import small_model


@pytest.fixture
def model():
    return small_model()
