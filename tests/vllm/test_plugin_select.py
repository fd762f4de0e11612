"""Platform selection by $LEGATO_VLLM (no engine start-up)."""

import pytest

vllm_legato = pytest.importorskip("vllm_legato")

pytestmark = pytest.mark.vllm


@pytest.mark.parametrize("value", [None, "", "0", "off"])
def test_stock_vllm_when_not_asked(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("LEGATO_VLLM", raising=False)
    else:
        monkeypatch.setenv("LEGATO_VLLM", value)
    assert vllm_legato.register() is None


@pytest.mark.parametrize(
    "value,device",
    [("1", "bertha"), ("evt0", "bertha"), ("bertha-evt1", "bertha-evt1"), ("EVT1", "bertha-evt1")],
)
def test_bertha_when_asked(monkeypatch, value, device):
    monkeypatch.setenv("LEGATO_VLLM", value)
    assert vllm_legato.register() == "vllm_legato.platform.BerthaPlatform"
    assert vllm_legato.selected_device() == device


def test_bad_value(monkeypatch):
    monkeypatch.setenv("LEGATO_VLLM", "gpu")
    with pytest.raises(ValueError, match="LEGATO_VLLM"):
        vllm_legato.register()


def test_entry_point():
    from importlib.metadata import entry_points

    eps = {ep.name: ep.value for ep in entry_points(group="vllm.platform_plugins")}
    assert eps.get("bertha") == "vllm_legato:register"
