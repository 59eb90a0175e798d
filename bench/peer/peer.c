/*
 * k3j's native peer: the hot kernels of a K3 decode step written in C (AVX2, OpenMP) under k3j's own
 * floating-point contract (docs/fp-contract.md), on the same deterministic inputs as the Java side
 * (engine/src/jmh/java/k3j/kernels/PeerInputs.java: splitmix64 streams). Same contract means the same bits:
 * ci/bench checks every Java output against the dumps written here before it quotes a Java/C ratio.
 *
 *   build: gcc -O3 -march=native -ffp-contract=off -fopenmp peer.c -o peer -lm
 *   usage: peer OUT_DIR THREADS [kernel ...]    kernels: stream bf16 mxfp4 kda_hot kda_dram lmhead (default all),
 *          and two probes run only when named: fma_peak (the cores' multiply-add throughput, double and float
 *          lanes) and bf16_ffma (the bf16 matvec accumulating in float with FMA: what the other contract would cost)
 *
 * Prints one line per kernel: "PEER <kernel> <threads> min <ms> median <ms> reps <n>" (stream: "GB/s").
 * Contract v2: the bf16 matvec, the LM head and MXFP4 accumulate in float with explicit FMA (_mm256_fmadd_ps, fmaf);
 * elsewhere (KDA) there is no FMA (-ffp-contract=off, separate mul and add).
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ inputs (PeerInputs.java) */

static uint64_t sm_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static float sm_unit(uint64_t *s) { return (float)(sm_next(s) >> 40) * (1.0f / 16777216.0f); }

static float *gen_x(int n, uint64_t seed) {
    float *x = aligned_alloc(64, ((size_t)n * 4 + 63) / 64 * 64);
    for (int i = 0; i < n; i++) x[i] = (sm_unit(&seed) - 0.5f) * 4.0f;
    return x;
}

static uint16_t *gen_bf16(size_t rows, size_t cols, uint64_t seed) {
    size_t n = rows * cols;
    uint16_t *m = aligned_alloc(64, (n * 2 + 63) / 64 * 64);
    for (size_t i = 0; i < n; i += 4) {
        uint64_t v = sm_next(&seed);
        for (int j = 0; j < 4; j++) {
            unsigned h = (unsigned)(v >> (16 * j)) & 0xFFFF;
            m[i + j] = (uint16_t)(((h >> 15) << 15) | ((117 + ((h >> 7) & 7)) << 7) | (h & 0x7F));
        }
    }
    return m;
}

static uint8_t *gen_bytes(size_t n, uint64_t seed) {
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = sm_next(&seed);
        for (int j = 0; j < 8; j++) b[i + j] = (uint8_t)(v >> (8 * j));
    }
    return b;
}

static uint8_t *gen_scales(size_t n, uint64_t seed) {
    uint8_t *s = gen_bytes(n, seed);
    for (size_t i = 0; i < n; i++) s[i] = s[i] == 0 ? 255 : (uint8_t)(120 + (s[i] & 7));
    return s;
}

/* ------------------------------------------------------------------ timing */

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef void (*kernel_fn)(void *);

/* warm-up calls, then timed calls until `reps` calls or `budget_ms` spent (at least 3) */
static void timeit(const char *name, int threads, kernel_fn f, void *arg, int warm, int reps, double budget_ms) {
    for (int i = 0; i < warm; i++) f(arg);
    double *t = malloc(sizeof(double) * reps);
    double start = now_ms();
    int n = 0;
    while (n < reps && (n < 3 || now_ms() - start < budget_ms)) {
        double t0 = now_ms();
        f(arg);
        t[n++] = now_ms() - t0;
    }
    qsort(t, n, sizeof(double), cmp_d);
    printf("PEER %s %d min %.4f median %.4f reps %d\n", name, threads, t[0], t[n / 2], n);
    fflush(stdout);
    free(t);
}

static void dump(const char *dir, const char *name, const void *p, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, bytes, f) != bytes) { perror(path); exit(1); }
    fclose(f);
}

/* ------------------------------------------------------------------ bf16 matvec (fp-contract v2 §2 "Dense matvec") */

/* per row: sixteen float accumulators a[i mod 16] over full blocks of 16, a[l] = fmaf(w, x, a[l]); one 256-bit load
   of 16 bf16 gives the even elements (<< 16) and the odd ones (& 0xFFFF0000): E = a[0,2..14], O = a[1,3..15], x in
   that lane order; tree c[l] = (a[l] + a[l+8]) + (a[l+4] + a[l+12]), acc = (c0 + c2) + (c1 + c3); tail by fmaf */
static inline float tree_lane_order(__m256 e, __m256 o) {
    float t[16];
    _mm256_storeu_ps(t, e);
    _mm256_storeu_ps(t + 8, o);
    float c0 = (t[0] + t[4]) + (t[2] + t[6]), c1 = (t[8] + t[12]) + (t[10] + t[14]);
    float c2 = (t[1] + t[5]) + (t[3] + t[7]), c3 = (t[9] + t[13]) + (t[11] + t[15]);
    return (c0 + c2) + (c1 + c3);
}

static inline float bf16f(uint16_t h) { union { uint32_t u; float f; } v = {.u = (uint32_t)h << 16}; return v.f; }

static void matvec_rows(float *y, const float *x, const float *xp, const uint16_t *w, long cols, long r0, long r1) {
    long full = cols / 16 * 16;
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000);
    long r = r0;
    for (; r + 2 <= r1; r += 2) { /* two rows in flight */
        const uint16_t *a = w + r * cols, *b = a + cols;
        __m256 ea = _mm256_setzero_ps(), oa = ea, eb = ea, ob = ea;
        for (long i = 0; i < full; i += 16) {
            __m256 xe = _mm256_loadu_ps(xp + i), xo = _mm256_loadu_ps(xp + i + 8);
            __m256i va = _mm256_loadu_si256((const __m256i *)(a + i)), vb = _mm256_loadu_si256((const __m256i *)(b + i));
            ea = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(va, 16)), xe, ea);
            oa = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(va, hi)), xo, oa);
            eb = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(vb, 16)), xe, eb);
            ob = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(vb, hi)), xo, ob);
        }
        float acc = tree_lane_order(ea, oa), bcc = tree_lane_order(eb, ob);
        for (long i = full; i < cols; i++) {
            acc = fmaf(bf16f(a[i]), x[i], acc);
            bcc = fmaf(bf16f(b[i]), x[i], bcc);
        }
        y[r] = acc;
        y[r + 1] = bcc;
    }
    for (; r < r1; r++) {
        const uint16_t *a = w + r * cols;
        __m256 ea = _mm256_setzero_ps(), oa = ea;
        for (long i = 0; i < full; i += 16) {
            __m256i va = _mm256_loadu_si256((const __m256i *)(a + i));
            ea = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(va, 16)), _mm256_loadu_ps(xp + i), ea);
            oa = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(va, hi)), _mm256_loadu_ps(xp + i + 8), oa);
        }
        float acc = tree_lane_order(ea, oa);
        for (long i = full; i < cols; i++) acc = fmaf(bf16f(a[i]), x[i], acc);
        y[r] = acc;
    }
}

/* x in the lane order of the kernels: per full block of 16, [x0 x2 .. x14 | x1 x3 .. x15] */
static void lane_order(float *xp, const float *x, long n) {
    long i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 8; k++) xp[i + k] = x[i + 2 * k], xp[i + 8 + k] = x[i + 2 * k + 1];
    for (; i < n; i++) xp[i] = x[i];
}

typedef struct { float *y; const float *x; float *xp; const uint16_t *w; long rows, cols; } mv_t;

static void matvec(void *p) {
    mv_t *m = p;
    lane_order(m->xp, m->x, m->cols); /* once per call, as the Java side does */
#pragma omp parallel
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        long per = ((m->rows + n - 1) / n + 1) / 2 * 2;
        long r0 = (long)t * per, r1 = r0 + per < m->rows ? r0 + per : m->rows;
        if (r0 < r1) matvec_rows(m->y, m->x, m->xp, m->w, m->cols, r0, r1);
    }
}

/* ------------------------------------------------------------------ MXFP4 (fp-contract v2 §2 "MXFP4") */

/* Mxfp4.repack's nibble form keeps each row's codes contiguous in groups of 16 bytes: for in % 32 == 0 (every shape
   here) that is the checkpoint layout itself, so the peer reads the generated bytes as they are. */
typedef struct { uint8_t *pk, *sc; int rows, in; } mx_t;

static float e8m0[256];

/* per row: the dense order over the weights T_g[code] = E2M1[code] * 2^(b-127) (exact); per group the eight
   magnitudes times the scale in one vector, indexed by vpermps with the code's low 3 bits, bit 3 OR-ed in as the
   sign; a byte-255 group is skipped (in % 32 == 0 here: no tail) */
static void mx_rows(float *y, const float *xp, const mx_t *w, int r0, int r1) {
    const __m256 mag = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    const __m256i seven = _mm256_set1_epi32(7), sign = _mm256_set1_epi32((int)0x80000000);
    int ng = w->in / 32;
    for (int r = r0; r < r1; r++) {
        const uint8_t *row = w->pk + (size_t)r * ng * 16, *sc = w->sc + (size_t)r * ng;
        __m256 e = _mm256_setzero_ps(), o = e;
        for (int g = 0; g < ng; g++) {
            if (sc[g] == 255) continue;
            __m256 tab = _mm256_mul_ps(mag, _mm256_set1_ps(e8m0[sc[g]]));
            for (int h = 0; h < 2; h++) {
                __m256i ce = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(row + 16 * g + 8 * h)));
                __m256i co = _mm256_srai_epi32(ce, 4);
                __m256 we = _mm256_or_ps(_mm256_permutevar8x32_ps(tab, _mm256_and_si256(ce, seven)), _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(ce, 28), sign)));
                __m256 wo = _mm256_or_ps(_mm256_permutevar8x32_ps(tab, _mm256_and_si256(co, seven)), _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(co, 28), sign)));
                e = _mm256_fmadd_ps(we, _mm256_loadu_ps(xp + 32 * g + 16 * h), e);
                o = _mm256_fmadd_ps(wo, _mm256_loadu_ps(xp + 32 * g + 16 * h + 8), o);
            }
        }
        y[r] = tree_lane_order(e, o);
    }
}

#define EXPERTS 16
#define HID 3584
#define INTER 3072
typedef struct { mx_t m[EXPERTS][3]; float *xh, *xi, *y; float *xph, *xpi; } moe_t;

static void mx_experts(void *p) {
    moe_t *e = p;
    lane_order(e->xph, e->xh, HID);
    lane_order(e->xpi, e->xi, INTER);
    const int per = 2 * INTER + HID;
    for (int x = 0; x < EXPERTS; x++)
        for (int k = 0; k < 3; k++) {
            const mx_t *w = &e->m[x][k];
            float *y = e->y + (size_t)x * per + (k == 0 ? 0 : k == 1 ? INTER : 2 * INTER);
            const float *xp = k < 2 ? e->xph : e->xpi;
#pragma omp parallel
            {
                int t = omp_get_thread_num(), n = omp_get_num_threads(), sh = (w->rows + n - 1) / n;
                int r0 = t * sh, r1 = r0 + sh < w->rows ? r0 + sh : w->rows;
                if (r0 < r1) mx_rows(y, xp, w, r0, r1);
            }
        }
}

/* ------------------------------------------------------------------ KDA step (fp-contract §2 "KDA recurrence step") */

#define H 96
#define D 128
typedef struct { float *S; int layers, at; float *q, *k, *v, *alpha, *beta, *o; } kda_t;

/* two fused passes per head, float, no FMA: decay + u; update + o from the updated row */
static void kda_head(float *S, float *o, const float *q, const float *k, const float *v, const float *al, float beta) {
    float u[D] __attribute__((aligned(32))), dv[D] __attribute__((aligned(32)));
    for (int j = 0; j < D; j++) u[j] = 0.0f;
    for (int i = 0; i < D; i++) {
        float a = al[i], ki = k[i];
        float *row = S + i * D;
        for (int j = 0; j < D; j += 8) {
            __m256 s = _mm256_mul_ps(_mm256_load_ps(row + j), _mm256_set1_ps(a));
            _mm256_store_ps(row + j, s);
            if (ki != 0.0f) _mm256_store_ps(u + j, _mm256_add_ps(_mm256_load_ps(u + j), _mm256_mul_ps(s, _mm256_set1_ps(ki))));
        }
    }
    for (int j = 0; j < D; j++) dv[j] = v[j] - u[j];
    for (int j = 0; j < D; j++) o[j] = 0.0f;
    for (int i = 0; i < D; i++) {
        float ki = k[i], qi = q[i];
        float *row = S + i * D;
        if (ki != 0.0f) {
            __m256 kb = _mm256_set1_ps(ki * beta);
            for (int j = 0; j < D; j += 8) _mm256_store_ps(row + j, _mm256_add_ps(_mm256_load_ps(row + j), _mm256_mul_ps(_mm256_load_ps(dv + j), kb)));
        }
        if (qi != 0.0f) {
            __m256 qq = _mm256_set1_ps(qi);
            for (int j = 0; j < D; j += 8) _mm256_store_ps(o + j, _mm256_add_ps(_mm256_load_ps(o + j), _mm256_mul_ps(_mm256_load_ps(row + j), qq)));
        }
    }
}

static void kda_step(void *p) {
    kda_t *t = p;
    float *S = t->S + (size_t)t->at * H * D * D;
    t->at = (t->at + 1) % t->layers;
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++)
        kda_head(S + (size_t)h * D * D, t->o + h * D, t->q + h * D, t->k + h * D, t->v + h * D, t->alpha + h * D, t->beta[h]);
}

static float *kda_state(int layer) {
    float *s = aligned_alloc(64, sizeof(float) * H * D * D);
    uint64_t r = 500 + layer;
    for (size_t i = 0; i < (size_t)H * D * D; i++) s[i] = (sm_unit(&r) - 0.5f) * 0.5f;
    return s;
}

static void kda_inputs(kda_t *t) {
    t->q = gen_x(H * D, 41), t->k = gen_x(H * D, 42), t->v = gen_x(H * D, 43);
    t->alpha = aligned_alloc(64, sizeof(float) * H * D), t->beta = aligned_alloc(64, sizeof(float) * 128), t->o = aligned_alloc(64, sizeof(float) * H * D);
    uint64_t r = 44;
    for (int i = 0; i < H * D; i++) t->alpha[i] = 0.9f + 0.1f * sm_unit(&r);
    r = 45;
    for (int h = 0; h < H; h++) t->beta[h] = sm_unit(&r);
    for (int i = 0; i < H * D; i += 37) t->k[i] = 0.0f;
    for (int i = 5; i < H * D; i += 41) t->q[i] = 0.0f;
}

/* ------------------------------------------------------------------ read bandwidth */

typedef struct { const double *a; size_t n; double sink; } bw_t;

static void bw_read(void *p) {
    bw_t *b = p;
    double total = 0.0;
#pragma omp parallel reduction(+ : total)
    {
        __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
#pragma omp for schedule(static)
        for (size_t i = 0; i < b->n; i += 16) {
            s0 = _mm256_add_pd(s0, _mm256_load_pd(b->a + i));
            s1 = _mm256_add_pd(s1, _mm256_load_pd(b->a + i + 4));
            s2 = _mm256_add_pd(s2, _mm256_load_pd(b->a + i + 8));
            s3 = _mm256_add_pd(s3, _mm256_load_pd(b->a + i + 12));
        }
        double l[4];
        _mm256_storeu_pd(l, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
        total += l[0] + l[1] + l[2] + l[3];
    }
    b->sink += total;
}

/* ------------------------------------------------------------------ probes: FMA peak, float-FMA matvec */

/* twelve independent FMA chains per thread (more than latency x ports), operands in registers: the cores' peak, in
   the widest vectors the build has (AVX-512 when -march=native has it, else AVX2) */
#ifdef __AVX512F__
#define FMA_LANES_D 8
typedef __m512d vd_t;
typedef __m512 vf_t;
#define VD_SET _mm512_set1_pd
#define VF_SET _mm512_set1_ps
#define VD_FMA _mm512_fmadd_pd
#define VF_FMA _mm512_fmadd_ps
#define VD_SUM _mm512_reduce_add_pd
#define VF_SUM _mm512_reduce_add_ps
#else
#define FMA_LANES_D 4
typedef __m256d vd_t;
typedef __m256 vf_t;
#define VD_SET _mm256_set1_pd
#define VF_SET _mm256_set1_ps
#define VD_FMA _mm256_fmadd_pd
#define VF_FMA _mm256_fmadd_ps
static double VD_SUM(__m256d v) { double l[4]; _mm256_storeu_pd(l, v); return l[0] + l[1] + l[2] + l[3]; }
static float VF_SUM(__m256 v) { float l[8]; _mm256_storeu_ps(l, v); return l[0] + l[1] + l[2] + l[3] + l[4] + l[5] + l[6] + l[7]; }
#endif
typedef struct { long iters; int flt; double sink; } fma_t;

static void fma_peak(void *p) {
    fma_t *f = p;
    double sink = 0;
#pragma omp parallel reduction(+ : sink)
    {
        if (f->flt) {
            vf_t q[12], m = VF_SET(0.9999f), a = VF_SET(1e-7f);
            for (int i = 0; i < 12; i++) q[i] = VF_SET((float)i);
            for (long n = 0; n < f->iters; n++)
                for (int i = 0; i < 12; i++) q[i] = VF_FMA(q[i], m, a);
            for (int i = 0; i < 12; i++) sink += VF_SUM(q[i]);
        } else {
            vd_t d[12], m = VD_SET(0.999999), a = VD_SET(1e-9);
            for (int i = 0; i < 12; i++) d[i] = VD_SET(i);
            for (long n = 0; n < f->iters; n++)
                for (int i = 0; i < 12; i++) d[i] = VD_FMA(d[i], m, a);
            for (int i = 0; i < 12; i++) sink += VD_SUM(d[i]);
        }
    }
    f->sink += sink;
}

static void bf16_ffma_rows(float *y, const float *x, const uint16_t *w, long cols, long r0, long r1) {
    long full = cols / 32 * 32;
    for (long r = r0; r < r1; r++) {
        const uint16_t *a = w + r * cols;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (long i = 0; i < full; i += 32) {
            __m256i h0 = _mm256_loadu_si256((const __m256i *)(a + i)), h1 = _mm256_loadu_si256((const __m256i *)(a + i + 16));
            __m256i z = _mm256_setzero_si256();
            /* interleaved order (lanes of the unpack): the sum is not the contract's, only its cost is measured */
            a0 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(z, h0)), _mm256_loadu_ps(x + i), a0);
            a1 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(z, h0)), _mm256_loadu_ps(x + i + 8), a1);
            a2 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(z, h1)), _mm256_loadu_ps(x + i + 16), a2);
            a3 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(z, h1)), _mm256_loadu_ps(x + i + 24), a3);
        }
        float l[8];
        _mm256_storeu_ps(l, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        float acc = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
        for (long i = full; i < cols; i++) {
            union { uint32_t u; float f; } wa = {.u = (uint32_t)a[i] << 16};
            acc = fmaf(wa.f, x[i], acc);
        }
        y[r] = acc;
    }
}

static void bf16_ffma(void *p) {
    mv_t *m = p;
#pragma omp parallel
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        long per = (m->rows + n - 1) / n;
        long r0 = (long)t * per, r1 = r0 + per < m->rows ? r0 + per : m->rows;
        if (r0 < r1) bf16_ffma_rows(m->y, m->x, m->w, m->cols, r0, r1);
    }
}

/* ------------------------------------------------------------------ main */

static int wanted(int argc, char **argv, const char *k) {
    if (argc <= 3) return 1;
    for (int i = 3; i < argc; i++) if (!strcmp(argv[i], k)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: peer OUT_DIR THREADS [stream|bf16|mxfp4|kda_hot|kda_dram|lmhead ...]\n"); return 2; }
    const char *out = argv[1];
    int threads = atoi(argv[2]);
    omp_set_num_threads(threads);
    for (int b = 0; b < 255; b++) e8m0[b] = ldexpf(1.0f, b - 127);

    if (wanted(argc, argv, "stream")) {
        bw_t b = {.n = (size_t)64 << 20}; /* 512 MB of doubles */
        double *a = aligned_alloc(64, b.n * 8);
        for (size_t i = 0; i < b.n; i++) a[i] = (double)(i & 1023);
        b.a = a;
        bw_read(&b);
        double best = 1e30;
        for (int r = 0; r < 6; r++) { double t0 = now_ms(); bw_read(&b); double t = now_ms() - t0; if (t < best) best = t; }
        printf("PEER stream %d GB/s %.2f\n", threads, b.n * 8 / (best * 1e-3) / 1e9);
        fflush(stdout);
        free(a);
    }
    if (wanted(argc, argv, "bf16")) {
        mv_t m = {.rows = 12288, .cols = 7168};
        m.w = gen_bf16(m.rows, m.cols, 12), m.x = gen_x(m.cols, 11);
        m.y = aligned_alloc(64, m.rows * 4), m.xp = aligned_alloc(64, m.cols * 4);
        timeit("bf16", threads, matvec, &m, 5, 40, 2500);
        dump(out, "bf16_y.bin", m.y, m.rows * 4);
        free((void *)m.w), free((void *)m.x), free(m.y), free(m.xp);
    }
    if (wanted(argc, argv, "mxfp4")) {
        moe_t *e = calloc(1, sizeof(moe_t));
        for (int x = 0; x < EXPERTS; x++)
            for (int k = 0; k < 3; k++) {
                int rows = k < 2 ? INTER : HID, cols = k < 2 ? HID : INTER;
                uint8_t *p = gen_bytes((size_t)rows * cols / 2, 1000 + x * 10 + k), *s = gen_scales((size_t)rows * cols / 32, 2000 + x * 10 + k);
                e->m[x][k] = (mx_t){p, s, rows, cols};
            }
        e->xh = gen_x(HID, 31), e->xi = gen_x(INTER, 32);
        e->xph = aligned_alloc(64, HID * 4), e->xpi = aligned_alloc(64, INTER * 4);
        e->y = malloc(sizeof(float) * EXPERTS * (2 * INTER + HID));
        timeit("mxfp4", threads, mx_experts, e, 2, 12, 3000);
        dump(out, "mxfp4_y.bin", e->y, sizeof(float) * EXPERTS * (2 * INTER + HID));
        for (int x = 0; x < EXPERTS; x++) for (int k = 0; k < 3; k++) free(e->m[x][k].pk), free(e->m[x][k].sc);
        free(e->y), free(e);
    }
    if (wanted(argc, argv, "kda_hot") || wanted(argc, argv, "kda_dram")) {
        kda_t t = {0};
        kda_inputs(&t);
        if (wanted(argc, argv, "kda_hot")) {
            t.layers = 1, t.S = kda_state(0);
            kda_step(&t); /* one step from the generated state: the dumped outputs */
            dump(out, "kda_o.bin", t.o, sizeof(float) * H * D);
            dump(out, "kda_S.bin", t.S, sizeof(float) * H * D * D);
            timeit("kda_hot", threads, kda_step, &t, 20, 400, 1500);
            free(t.S);
        }
        if (wanted(argc, argv, "kda_dram")) {
            t.layers = 16, t.at = 0, t.S = aligned_alloc(64, sizeof(float) * 16 * H * D * D);
            for (int l = 0; l < 16; l++) { float *s = kda_state(l); memcpy(t.S + (size_t)l * H * D * D, s, sizeof(float) * H * D * D); free(s); }
            timeit("kda_dram", threads, kda_step, &t, 16, 160, 2000); /* each call a different layer's state */
            free(t.S);
        }
    }
    if (argc > 3 && wanted(argc, argv, "fma_peak")) {
        double gmac[2];
        for (int flt = 0; flt < 2; flt++) {
            fma_t f = {.iters = 10000000, .flt = flt};
            fma_peak(&f);
            double best = 1e30;
            for (int r = 0; r < 5; r++) { double t0 = now_ms(); fma_peak(&f); double t = now_ms() - t0; if (t < best) best = t; }
            gmac[flt] = (double)threads * f.iters * 12 * FMA_LANES_D * (flt ? 2 : 1) / (best * 1e-3) / 1e9;
        }
        printf("PEER fma_peak %d GMAC/s double %.2f float %.2f lanes %d\n", threads, gmac[0], gmac[1], FMA_LANES_D);
        fflush(stdout);
    }
    if (argc > 3 && wanted(argc, argv, "bf16_ffma")) {
        mv_t m = {.rows = 12288, .cols = 7168};
        m.w = gen_bf16(m.rows, m.cols, 12), m.x = gen_x(m.cols, 11);
        m.y = aligned_alloc(64, m.rows * 4);
        timeit("bf16_ffma", threads, bf16_ffma, &m, 5, 40, 2500);
        free((void *)m.w), free((void *)m.x), free(m.y);
    }
    if (wanted(argc, argv, "lmhead")) {
        mv_t m = {.rows = 163840, .cols = 7168};
        m.w = gen_bf16(m.rows, m.cols, 13), m.x = gen_x(m.cols, 11);
        m.y = aligned_alloc(64, m.rows * 4), m.xp = aligned_alloc(64, m.cols * 4);
        timeit("lmhead", threads, matvec, &m, 1, 6, 3000);
        dump(out, "lmhead_y.bin", m.y, m.rows * 4);
        free((void *)m.w), free((void *)m.x), free(m.y), free(m.xp);
    }
    return 0;
}
