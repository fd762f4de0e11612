/* The shared-DRAM channel booking of a DMA end, compiled (issue 15): what the loop of
 * `timing.DramTiming.dma` does for one contiguous range (`dram_book`) and native/loop.c does
 * for a DMA's and a dma2d's ends, on the same int64 timelines (that Python is the reference;
 * tests/unit/targets/test_vpu_native.py compares the two). Every quantity is an integer cycle
 * or byte count, so the results are the same numbers. */
#include <stdint.h>

enum { DRAM_MAXC = 256 }; /* the most channels booked here */

/* `timing.channel_bytes`: add the bytes of [addr, addr + n) on each channel into out */
static void chan_count(int64_t *out, int channels, int64_t granule, int64_t addr, int64_t n) {
    if (n <= 0) return;
    int64_t end = addr + n, first = addr / granule, last = (end - 1) / granule;
    if (first == last) {
        out[first % channels] += n;
        return;
    }
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

/* `timing.channel_bytes_2d`: add the bytes of `rows` rows of `row` bytes, row i at
 * addr + i * stride, on each channel into out. The rows' offsets modulo one interleave period
 * repeat from the first i with i * stride a multiple of it, so that many rows are counted, each
 * as often as it recurs. */
static void chan_count_2d(int64_t *out, int channels, int64_t granule, int64_t addr,
                          int64_t rows, int64_t row, int64_t stride) {
    if (rows <= 0 || row <= 0) return;
    int64_t period = granule * channels, cap = rows < period ? rows : period, cycle = cap;
    for (int64_t i = 1; i < cap; i++)
        if ((i * stride) % period == 0) {
            cycle = i;
            break;
        }
    int64_t full = rows / cycle, rest = rows % cycle, one[DRAM_MAXC];
    for (int64_t i = 0; i < cycle; i++) {
        int64_t times = full + (i < rest ? 1 : 0);
        if (!times) continue;
        for (int c = 0; c < channels; c++)
            one[c] = 0;
        chan_count(one, channels, granule, addr + i * stride, row);
        for (int c = 0; c < channels; c++)
            out[c] += one[c] * times;
    }
}

/* Book the bytes `out` counts per channel from cycle `t` (each channel moving `rate` bytes a
 * cycle): each channel's free time and booked bytes move on; returns the latest end among
 * `data_end` and the channels' ends. */
static int64_t chan_book(int64_t *free, int64_t *booked, int channels, int64_t rate, int64_t t,
                         const int64_t *out, int64_t data_end) {
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

/* Book [addr, addr + n) (interleaved by `granule` over `channels` channels, each moving `rate`
 * bytes a cycle) from cycle `t`: each channel's free time and booked bytes move on; returns
 * the latest end among `data_end` and the channels' ends; -1 when it cannot (the caller's
 * Python books it). */
int64_t dram_book(int64_t *free, int64_t *booked, int channels, int64_t granule, int64_t rate,
                  int64_t t, int64_t addr, int64_t n, int64_t data_end) {
    int64_t out[DRAM_MAXC];
    if (channels <= 0 || channels > DRAM_MAXC || granule <= 0 || rate <= 0 || addr < 0)
        return -1;
    for (int c = 0; c < channels; c++)
        out[c] = 0;
    chan_count(out, channels, granule, addr, n);
    return chan_book(free, booked, channels, rate, t, out, data_end);
}
