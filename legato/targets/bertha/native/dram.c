/* The shared-DRAM channel booking of a DMA end, compiled (issue 15): what the loop of
 * `timing.DramTiming.dma` does for one contiguous range, on the same int64 timelines (that
 * Python is the reference; tests/unit/targets/test_vpu_native.py compares the two). Every
 * quantity is an integer cycle or byte count, so the results are the same numbers. */
#include <stdint.h>

/* Book [addr, addr + n) (interleaved by `granule` over `channels` channels, each moving `rate`
 * bytes a cycle) from cycle `t`: each channel's free time and booked bytes move on; returns
 * the latest end among `data_end` and the channels' ends; -1 when it cannot (the caller's
 * Python books it). */
int64_t dram_book(int64_t *free, int64_t *booked, int channels, int64_t granule, int64_t rate,
                  int64_t t, int64_t addr, int64_t n, int64_t data_end) {
    enum { MAXC = 256 };
    int64_t out[MAXC];
    if (channels <= 0 || channels > MAXC || granule <= 0 || rate <= 0 || addr < 0)
        return -1;
    for (int c = 0; c < channels; c++)
        out[c] = 0;
    if (n > 0) {
        int64_t end = addr + n, first = addr / granule, last = (end - 1) / granule;
        if (first == last) {
            out[first % channels] += n;
        } else {
            out[first % channels] += (first + 1) * granule - addr;
            out[last % channels] += end - last * granule;
            int64_t full = last - first - 1;
            if (full > 0) {
                int64_t q = full / channels, r = full % channels;
                for (int c = 0; c < channels; c++)
                    out[c] += q * granule;
                for (int64_t j = 0; j < r; j++)
                    out[(first + 1 + j) % channels] += granule;
            }
        }
    }
    for (int c = 0; c < channels; c++) {
        int64_t b = out[c];
        if (b) {
            int64_t cstart = free[c] < t ? t : free[c];
            int64_t cend = cstart + (b + rate - 1) / rate;
            free[c] = cend;
            booked[c] += b;
            if (cend > data_end)
                data_end = cend;
        }
    }
    return data_end;
}
