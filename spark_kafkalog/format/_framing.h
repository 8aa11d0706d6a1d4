/* Kafka's codec framings in C, one place per byte rule (included by _decode.pyx; the
   codec registry reaches them through the kernel's decompress_framed and zstd_frames):

   lz4     LZ4 frames (frame format 1.6) back to back, skippable frames between them.
           Kafka's Lz4BlockOutputStream writes FLG = version 1 + independent blocks,
           BD = 64 KiB, no checksums, no content size; other writers add content size,
           block / content checksums (xxHash32) or linked blocks: all are read (Kafka's
           Lz4BlockInputStream refuses linked blocks and reads one frame, ignoring what
           follows; we read them, as the lz4 library does, and every frame, refusing
           stray bytes). A dictionary id and reserved bits are errors, as in Kafka.
           KAFKA-1493: Kafka before 0.10 computed the header checksum HC over the 4
           magic bytes too; Kafka reads magic 0 data ignoring HC. For magic 0 we accept
           the correct HC or that broken one, nothing else.
   snappy  snappy-java's SnappyOutputStream ("xerial"): magic \x82SNAPPY\0, two int32
           (version, compatible version: not checked, some writers put them
           little-endian), then blocks of int32-BE length + raw snappy block. Without
           the magic: one raw snappy block (librdkafka, old clients).
   zstd    frames back to back (zstd-jni writes one, with or without a content size),
           skippable frames between them: walked here, decoded by zstandard.
   skippable frames (lz4 and zstd): magic 0x184D2A50..5F, uint32-LE length, bytes.

   Each format is walked first (structure and an upper bound of the output, reading
   only headers), then decoded into a buffer the caller sized from that bound. Every
   read is checked against the input, every write against the output room; copies may
   write up to KL_SLACK bytes past the room (whole words), so buffers carry KL_SLACK
   spare bytes. Output per input byte is bounded (lz4: 255, snappy: 22), so no
   allocation is larger than a constant times the input. A failure returns -1 with a
   kl_ferr: a code (KF_*), the payload byte it is at and up to two values;
   _decode_codecs.pxi (part of _decode.pyx) turns it into a CodecError. */
#ifndef KL_FRAMING_H
#define KL_FRAMING_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include "_checksums.h"

#define KL_SLACK 32

typedef struct {
    int code;
    uint64_t pos, a, b;
} kl_ferr;

enum {
    KF_OK = 0,
    KF_TOO_LARGE,           /* output past the budget (a = declared size, or 0) */
    KF_EMPTY,               /* an empty payload */
    KF_STRAY,               /* a = count of bytes too few to start a frame */
    KF_SKIP_TRUNC,          /* skippable frame header cut short */
    KF_SKIP_PAST,           /* a = its length: runs past the payload */
    KF_LZ4_MAGIC,           /* a = the magic found */
    KF_LZ4_HEADER_TRUNC,
    KF_LZ4_VERSION,         /* a = version */
    KF_LZ4_RESERVED,        /* a = FLG, b = BD */
    KF_LZ4_DICT,
    KF_LZ4_BLOCK_ID,        /* a = block size id */
    KF_LZ4_HC,              /* a = stored, b = computed */
    KF_LZ4_NO_END,          /* frame (at pos) has no end mark */
    KF_LZ4_BLOCK_BIG,       /* a = block size, b = frame's maximum */
    KF_LZ4_BLOCK_PAST,      /* a = block size */
    KF_LZ4_CSUM_TRUNC,      /* content checksum cut short (frame at pos) */
    KF_LZ4_SIZE_CAP,        /* a = declared content size, b = what the blocks hold */
    KF_LZ4_BLOCK_SUM,       /* block checksum mismatch */
    KF_LZ4_BLOCK_BAD,       /* block does not decode */
    KF_LZ4_BLOCK_OVER,      /* b = frame's block size: a block decodes to more */
    KF_LZ4_SIZE_MISMATCH,   /* a = declared, b = decoded (UINT64_MAX: more than a) */
    KF_LZ4_CSUM,            /* content checksum mismatch (frame at pos) */
    KF_SNAPPY_HEADER_TRUNC,
    KF_SNAPPY_LEN_TRUNC,
    KF_SNAPPY_BLOCK_PAST,   /* a = block size */
    KF_SNAPPY_PREAMBLE,     /* bad uncompressed-length varint */
    KF_SNAPPY_DECLARED,     /* a = declared, b = block bytes: more than they can hold */
    KF_SNAPPY_BLOCK_BAD,    /* a = declared */
    KF_ZSTD_MAGIC,          /* a = the magic found */
    KF_ZSTD_HEADER_TRUNC,
    KF_ZSTD_RESERVED,
    KF_ZSTD_TRUNC,          /* frame (at pos) ends inside a block header */
    KF_ZSTD_BLOCK_TYPE,     /* a block of the reserved type */
    KF_ZSTD_BLOCK_BIG,      /* a = block size */
    KF_ZSTD_BLOCK_PAST,
    KF_ZSTD_CSUM_TRUNC      /* checksum cut short (frame at pos) */
};

static inline int kl_fail(kl_ferr* e, int code, uint64_t pos, uint64_t a, uint64_t b) {
    e->code = code; e->pos = pos; e->a = a; e->b = b;
    return -1;
}

static inline uint64_t kl_le64(const uint8_t* p) {
    return (uint64_t)kl_le32(p) | ((uint64_t)kl_le32(p + 4) << 32);
}

static inline uint32_t kl_framing_be32(const uint8_t* p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* ---- copies ------------------------------------------------------------------------- */

/* copy a match of `len` bytes from `off` bytes back (the caller checked both) */
static inline void kl_match(uint8_t* op, size_t off, size_t len) {
    const uint8_t* m = op - off;
    uint8_t* e = op + len;
    if (off >= 16) {
        do { memcpy(op, m, 16); op += 16; m += 16; } while (op < e);
    } else if (off >= 8) {
        do { memcpy(op, m, 8); op += 8; m += 8; } while (op < e);
    } else {
        /* a pattern of period off < 8: copy bytewise until the source can stay a whole
           number of periods (>= 8 bytes) behind, then by words */
        size_t d = off * ((8 + off - 1) / off), t = d - off;
        if (t > len) t = len;
        while (t--) { *op = *m; op++; m++; }
        m = op - d;
        while (op < e) { memcpy(op, m, 8); op += 8; m += 8; }
    }
}

/* ---- skippable frames (lz4 and zstd) ---------------------------------------------------- */
#define KL_SKIPPABLE_MASK 0xFFFFFFF0u
#define KL_SKIPPABLE_MAGIC 0x184D2A50u

/* The frame at src[pos] (n - pos >= 4): 1 and *after set for a skippable frame, 0 for
   another frame, -1 when the skippable frame does not fit the payload. */
static int kl_skippable(const uint8_t* src, size_t n, size_t pos, size_t* after,
                        kl_ferr* e) {
    uint32_t size;
    if ((kl_le32(src + pos) & KL_SKIPPABLE_MASK) != KL_SKIPPABLE_MAGIC) return 0;
    if (n - pos < 8) return kl_fail(e, KF_SKIP_TRUNC, pos, 0, 0);
    size = kl_le32(src + pos + 4);
    if (size > n - pos - 8) return kl_fail(e, KF_SKIP_PAST, pos, size, 0);
    *after = pos + 8 + size;
    return 1;
}

/* ---- lz4 ------------------------------------------------------------------------------ */
#define KL_LZ4_MAGIC 0x184D2204u
#define KL_LZ4_FLG_VERSION 0xC0u
#define KL_LZ4_FLG_INDEPENDENT 0x20u
#define KL_LZ4_FLG_BLOCK_SUM 0x10u
#define KL_LZ4_FLG_SIZE 0x08u
#define KL_LZ4_FLG_CONTENT_SUM 0x04u
#define KL_LZ4_FLG_RESERVED 0x02u
#define KL_LZ4_FLG_DICT 0x01u
#define KL_LZ4_BD_RESERVED 0x8Fu
#define KL_LZ4_UNCOMPRESSED 0x80000000u
#define KL_LZ4_MAX_RATIO 255u   /* a compressed block of k bytes decodes to <= 255 k */

typedef struct {
    unsigned flg;
    size_t bsize;               /* the frame's maximum block size */
    int has_size;
    uint64_t declared;          /* content size, when has_size */
    size_t data;                /* position of the first block */
} kl_lz4_frame;

/* The LZ4 frame header at src[pos] (magic already checked). `magic` is the Kafka
   message format the payload came in: 0 admits KAFKA-1493's header checksum. */
static int kl_lz4_header(const uint8_t* src, size_t n, size_t pos, int magic,
                         kl_lz4_frame* f, kl_ferr* e) {
    size_t dlen;
    unsigned bd, hc, good;
    if (n - pos < 7) return kl_fail(e, KF_LZ4_HEADER_TRUNC, pos, 0, 0);
    f->flg = src[pos + 4];
    bd = src[pos + 5];
    if ((f->flg & KL_LZ4_FLG_VERSION) != 0x40u)
        return kl_fail(e, KF_LZ4_VERSION, pos, f->flg >> 6, 0);
    if (f->flg & KL_LZ4_FLG_DICT) return kl_fail(e, KF_LZ4_DICT, pos, 0, 0);
    if ((f->flg & KL_LZ4_FLG_RESERVED) || (bd & KL_LZ4_BD_RESERVED))
        return kl_fail(e, KF_LZ4_RESERVED, pos, f->flg, bd);
    if ((bd >> 4) < 4) return kl_fail(e, KF_LZ4_BLOCK_ID, pos, bd >> 4, 0);
    f->bsize = (size_t)1 << (2 * (bd >> 4) + 8);
    f->has_size = (f->flg & KL_LZ4_FLG_SIZE) != 0;
    dlen = f->has_size ? 10 : 2;
    if (n - pos < 4 + dlen + 1) return kl_fail(e, KF_LZ4_HEADER_TRUNC, pos, 0, 0);
    f->declared = f->has_size ? kl_le64(src + pos + 6) : 0;
    hc = src[pos + 4 + dlen];
    good = (kl_xxh32(src + pos + 4, dlen, 0) >> 8) & 0xFFu;
    if (hc != good && !(magic == 0 && hc == ((kl_xxh32(src + pos, 4 + dlen, 0) >> 8) & 0xFFu)))
        return kl_fail(e, KF_LZ4_HC, pos, hc, good);
    f->data = pos + 4 + dlen + 1;
    return 0;
}

/* Walk the LZ4 (and skippable) frames of src[0:n] without decoding. On success *bound
   is an upper bound of the output: a frame's declared content size, else per block its
   size (stored) or min(block size, 255 x its bytes) (compressed). */
static int kl_lz4_walk(const uint8_t* src, size_t n, int magic, uint64_t* bound,
                       kl_ferr* e) {
    size_t pos = 0, start, after, sz, bsum;
    uint64_t total = 0, held, tight;
    uint32_t word;
    kl_lz4_frame f;
    int r;
    if (n == 0) return kl_fail(e, KF_EMPTY, 0, 0, 0);
    while (pos < n) {
        if (n - pos < 4) return kl_fail(e, KF_STRAY, pos, n - pos, 0);
        r = kl_skippable(src, n, pos, &after, e);
        if (r < 0) return -1;
        if (r) { pos = after; continue; }
        if (kl_le32(src + pos) != KL_LZ4_MAGIC)
            return kl_fail(e, KF_LZ4_MAGIC, pos, kl_le32(src + pos), 0);
        start = pos;
        if (kl_lz4_header(src, n, pos, magic, &f, e)) return -1;
        bsum = (f.flg & KL_LZ4_FLG_BLOCK_SUM) ? 4 : 0;
        pos = f.data;
        held = tight = 0;
        for (;;) {
            if (n - pos < 4) return kl_fail(e, KF_LZ4_NO_END, start, 0, 0);
            word = kl_le32(src + pos);
            if (word == 0) { pos += 4; break; }
            sz = word & ~KL_LZ4_UNCOMPRESSED;
            if (sz > f.bsize) return kl_fail(e, KF_LZ4_BLOCK_BIG, pos, sz, f.bsize);
            if (sz + bsum > n - pos - 4) return kl_fail(e, KF_LZ4_BLOCK_PAST, pos, sz, 0);
            if (word & KL_LZ4_UNCOMPRESSED) {
                held += sz; tight += sz;
            } else {
                held += f.bsize;
                tight += (uint64_t)sz * KL_LZ4_MAX_RATIO < f.bsize
                         ? (uint64_t)sz * KL_LZ4_MAX_RATIO : f.bsize;
            }
            pos += 4 + sz + bsum;
        }
        if (f.flg & KL_LZ4_FLG_CONTENT_SUM) {
            if (n - pos < 4) return kl_fail(e, KF_LZ4_CSUM_TRUNC, start, 0, 0);
            pos += 4;
        }
        if (f.has_size) {
            /* a frame cannot hold more than its blocks can (the size is never trusted
               past that) */
            if (f.declared > held) return kl_fail(e, KF_LZ4_SIZE_CAP, start, f.declared, held);
            total += f.declared;
        } else {
            total += tight;
        }
    }
    *bound = total;
    return 0;
}

/* One LZ4 block src[0:n] into dst[0:cap); matches may reach back to `lo`. Returns the
   bytes written, -1 when malformed, -2 when the output would pass cap. */
static int64_t kl_lz4_block(const uint8_t* src, size_t n, uint8_t* dst, size_t cap,
                            const uint8_t* lo) {
    const uint8_t* ip = src;
    const uint8_t* const iend = src + n;
    uint8_t* op = dst;
    uint8_t* const oend = dst + cap;
    size_t lit, ml, off;
    unsigned token, b;
    if (n == 0) return -1;
    for (;;) {
        token = *ip++;
        lit = token >> 4;
        if (lit == 15) {
            do { if (ip >= iend) return -1; b = *ip++; lit += b; } while (b == 255);
        }
        if (lit > (size_t)(iend - ip)) return -1;
        if (lit > (size_t)(oend - op)) return -2;
        if (lit <= 16 && iend - ip >= 16) memcpy(op, ip, 16);
        else memcpy(op, ip, lit);
        op += lit; ip += lit;
        if (ip == iend) break;                 /* the last sequence: literals only */
        if (iend - ip < 3) return -1;          /* offset, and then another token */
        off = (size_t)ip[0] | ((size_t)ip[1] << 8);
        ip += 2;
        if (off == 0 || off > (size_t)(op - lo)) return -1;
        ml = token & 15u;
        if (ml == 15) {
            do { if (ip >= iend) return -1; b = *ip++; ml += b; } while (b == 255);
        }
        ml += 4;
        if (ml > (size_t)(oend - op)) return -2;
        kl_match(op, off, ml);
        op += ml;
        if (ip >= iend) return -1;             /* a block ends with literals */
    }
    return (int64_t)(op - dst);
}

/* Decode the frames of src[0:n], which kl_lz4_walk accepted with the same `magic`, into
   dst[0:cap) (plus KL_SLACK). cap below the walk's bound means the budget binds: output
   past it is KF_TOO_LARGE. Block and content checksums are verified, a declared content
   size must match. Returns the output size or -1. */
static int64_t kl_lz4_decode(const uint8_t* src, size_t n, int magic, uint8_t* dst,
                             size_t cap, kl_ferr* e) {
    size_t pos = 0, start, after, sz, room, lim;
    uint32_t word;
    int64_t got;
    int linked, bsum, r;
    uint8_t* op = dst;
    uint8_t* fstart;
    kl_lz4_frame f;
    while (pos < n) {
        r = kl_skippable(src, n, pos, &after, e);         /* the walk checked both */
        if (r < 0) return -1;
        if (r) { pos = after; continue; }
        start = pos;
        if (kl_lz4_header(src, n, pos, magic, &f, e)) return -1;
        linked = !(f.flg & KL_LZ4_FLG_INDEPENDENT);
        bsum = (f.flg & KL_LZ4_FLG_BLOCK_SUM) != 0;
        room = (size_t)(dst + cap - op);
        if (f.has_size) {
            if (f.declared > room) return kl_fail(e, KF_TOO_LARGE, start, f.declared, 0);
            room = (size_t)f.declared;
        }
        pos = f.data;
        fstart = op;
        for (;;) {
            word = kl_le32(src + pos);
            pos += 4;
            if (word == 0) break;
            sz = word & ~KL_LZ4_UNCOMPRESSED;
            if (bsum && kl_xxh32(src + pos, sz, 0) != kl_le32(src + pos + sz))
                return kl_fail(e, KF_LZ4_BLOCK_SUM, pos - 4, 0, 0);
            lim = room < f.bsize ? room : f.bsize;
            if (word & KL_LZ4_UNCOMPRESSED) {
                got = sz > lim ? -2 : (int64_t)sz;
                if (got >= 0) memcpy(op, src + pos, sz);
            } else {
                /* linked blocks may reference the frame's earlier output, independent
                   ones only their own */
                got = kl_lz4_block(src + pos, sz, op, lim, linked ? fstart : op);
                if (got == -1) return kl_fail(e, KF_LZ4_BLOCK_BAD, pos - 4, 0, 0);
            }
            if (got == -2) {
                if (lim == f.bsize) return kl_fail(e, KF_LZ4_BLOCK_OVER, pos - 4, 0, f.bsize);
                if (f.has_size)
                    return kl_fail(e, KF_LZ4_SIZE_MISMATCH, start, f.declared, UINT64_MAX);
                return kl_fail(e, KF_TOO_LARGE, pos - 4, 0, 0);
            }
            op += got;
            room -= (size_t)got;
            pos += sz + (bsum ? 4 : 0);
        }
        if (f.has_size && (uint64_t)(op - fstart) != f.declared)
            return kl_fail(e, KF_LZ4_SIZE_MISMATCH, start, f.declared, (uint64_t)(op - fstart));
        if (f.flg & KL_LZ4_FLG_CONTENT_SUM) {
            if (kl_xxh32(fstart, (size_t)(op - fstart), 0) != kl_le32(src + pos))
                return kl_fail(e, KF_LZ4_CSUM, start, 0, 0);
            pos += 4;
        }
    }
    return (int64_t)(op - dst);
}

/* ---- snappy (xerial framing or one raw block) ------------------------------------------ */
#define KL_XERIAL_HEADER_SIZE 16
#define KL_SNAPPY_MAX_RATIO 22u   /* a copy tag of 3 bytes writes <= 64: < 22 per byte */
static const uint8_t kl_xerial_magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};

static inline int kl_is_xerial(const uint8_t* src, size_t n) {
    return n >= sizeof kl_xerial_magic && memcmp(src, kl_xerial_magic, sizeof kl_xerial_magic) == 0;
}

/* The uncompressed length a raw snappy block src[0:n] (at payload byte `at`) declares:
   its varint preamble, at most 5 bytes, < 2**32. Returns the preamble length, or 0 with
   *e set. */
static size_t kl_snappy_len(const uint8_t* p, size_t n, size_t at, uint64_t* out,
                            kl_ferr* e) {
    uint64_t v = 0;
    size_t i;
    for (i = 0; i < n && i < 5; i++) {
        v |= (uint64_t)(p[i] & 0x7Fu) << (7 * i);
        if (!(p[i] & 0x80u)) {
            if (v > 0xFFFFFFFFu) break;
            *out = v;
            return i + 1;
        }
    }
    kl_fail(e, KF_SNAPPY_PREAMBLE, at, 0, 0);
    return 0;
}

/* One block's declared length `len` added to the running total *t: past `max_size` the
   payload is too large; past 22 x the block's bytes after the preamble it is corrupt. */
static int kl_snappy_add(uint64_t len, size_t body, size_t at, uint64_t max_size,
                         uint64_t* t, kl_ferr* e) {
    *t += len;
    if (*t > max_size) return kl_fail(e, KF_TOO_LARGE, at, *t, 0);
    if (len > (uint64_t)body * KL_SNAPPY_MAX_RATIO)
        return kl_fail(e, KF_SNAPPY_DECLARED, at, len, body);
    return 0;
}

/* Walk a snappy payload without decoding: its exact output size (<= max_size) into
   *total. */
static int kl_snappy_walk(const uint8_t* src, size_t n, uint64_t max_size, uint64_t* total,
                          kl_ferr* e) {
    size_t pos, bsz, hdr;
    uint64_t len, t = 0;
    if (kl_is_xerial(src, n)) {
        if (n < KL_XERIAL_HEADER_SIZE) return kl_fail(e, KF_SNAPPY_HEADER_TRUNC, 0, 0, 0);
        for (pos = KL_XERIAL_HEADER_SIZE; pos < n; pos += bsz) {
            if (n - pos < 4) return kl_fail(e, KF_SNAPPY_LEN_TRUNC, pos, 0, 0);
            bsz = kl_framing_be32(src + pos);
            if (bsz > n - pos - 4) return kl_fail(e, KF_SNAPPY_BLOCK_PAST, pos, bsz, 0);
            pos += 4;
            hdr = kl_snappy_len(src + pos, bsz, pos, &len, e);
            if (hdr == 0 || kl_snappy_add(len, bsz - hdr, pos, max_size, &t, e)) return -1;
        }
    } else {
        hdr = kl_snappy_len(src, n, 0, &len, e);
        if (hdr == 0 || kl_snappy_add(len, n - hdr, 0, max_size, &t, e)) return -1;
    }
    *total = t;
    return 0;
}

/* One raw snappy block src[0:n] whose preamble is `hdr` bytes and declares `len`, into
   dst (room for len + KL_SLACK). Returns 0 when exactly len bytes came out, else -1. */
static int kl_snappy_block(const uint8_t* src, size_t n, size_t hdr, size_t len,
                           uint8_t* dst) {
    const uint8_t* ip = src + hdr;
    const uint8_t* const iend = src + n;
    uint8_t* op = dst;
    uint8_t* const oend = dst + len;
    size_t l, off, k, i;
    unsigned tag;
    while (ip < iend) {
        tag = *ip++;
        switch (tag & 3u) {
        case 0:
            l = tag >> 2;
            if (l >= 60) {
                k = l - 59;                    /* 1..4 length bytes, little-endian */
                if ((size_t)(iend - ip) < k) return -1;
                l = 0;
                for (i = 0; i < k; i++) l |= (size_t)ip[i] << (8 * i);
                ip += k;
            }
            l += 1;
            if (l > (size_t)(iend - ip) || l > (size_t)(oend - op)) return -1;
            if (l <= 16 && iend - ip >= 16) memcpy(op, ip, 16);
            else memcpy(op, ip, l);
            op += l; ip += l;
            continue;
        case 1:
            if (ip >= iend) return -1;
            l = 4 + ((tag >> 2) & 7u);
            off = ((size_t)(tag & 0xE0u) << 3) | *ip++;
            break;
        case 2:
            if ((size_t)(iend - ip) < 2) return -1;
            l = 1 + (tag >> 2);
            off = (size_t)ip[0] | ((size_t)ip[1] << 8);
            ip += 2;
            break;
        default:
            if ((size_t)(iend - ip) < 4) return -1;
            l = 1 + (tag >> 2);
            off = kl_le32(ip);
            ip += 4;
            break;
        }
        if (off == 0 || off > (size_t)(op - dst) || l > (size_t)(oend - op)) return -1;
        kl_match(op, off, l);
        op += l;
    }
    return op == oend ? 0 : -1;
}

/* Decode a payload kl_snappy_walk accepted into dst (room for its total + KL_SLACK). */
static int kl_snappy_decode(const uint8_t* src, size_t n, uint8_t* dst, kl_ferr* e) {
    size_t pos, bsz, hdr;
    uint64_t len = 0;
    if (kl_is_xerial(src, n)) {
        for (pos = KL_XERIAL_HEADER_SIZE; pos < n; pos += bsz) {
            bsz = kl_framing_be32(src + pos);
            pos += 4;
            hdr = kl_snappy_len(src + pos, bsz, pos, &len, e);
            if (kl_snappy_block(src + pos, bsz, hdr, (size_t)len, dst))
                return kl_fail(e, KF_SNAPPY_BLOCK_BAD, pos, len, 0);
            dst += len;
        }
        return 0;
    }
    hdr = kl_snappy_len(src, n, 0, &len, e);
    if (kl_snappy_block(src, n, hdr, (size_t)len, dst))
        return kl_fail(e, KF_SNAPPY_BLOCK_BAD, 0, len, 0);
    return 0;
}
/* ---- zstd: the frame walk (zstandard decodes) ------------------------------------------
   RFC 8878 section 3.1.1: magic, frame header descriptor FHD (bits 7-6 content size
   flag, 5 single segment, 3 reserved, 2 content checksum, 1-0 dictionary id flag),
   window descriptor unless single segment, dictionary id, content size (flag 0 means 1
   byte when single segment; a 2-byte size is stored minus 256), then blocks of a 3-byte
   header (bit 0 last, bits 1-2 type: raw, RLE, compressed, reserved; the rest the size,
   at most 128 KiB), then the checksum if FHD says so. */
#define KL_ZSTD_MAGIC 0xFD2FB528u
#define KL_ZSTD_BLOCK_MAX (128u * 1024u)

typedef struct {
    size_t start, end;          /* the frame is src[start:end] */
    int has_size, dict;
    uint64_t content_size;
    uint64_t bound;             /* upper bound of the output, from the block headers */
} kl_zstd_frame;

/* The next zstd frame at or after *pos, skipping skippable frames: 1 with *f filled and
   *pos moved past the frame, 0 at the end of the payload, -1 with *e set. */
static int kl_zstd_next(const uint8_t* src, size_t n, size_t* pos, kl_zstd_frame* f,
                        kl_ferr* e) {
    static const uint8_t dict_sizes[4] = {0, 1, 2, 4};
    static const uint8_t fcs_sizes[4] = {0, 2, 4, 8};
    size_t p = *pos, after, fcs, bsize, i;
    uint32_t h;
    unsigned fhd, btype;
    int r;
    for (;;) {
        if (p >= n) return 0;
        if (n - p < 4) return kl_fail(e, KF_STRAY, p, n - p, 0);
        r = kl_skippable(src, n, p, &after, e);
        if (r < 0) return -1;
        if (!r) break;
        p = after;
    }
    if (kl_le32(src + p) != KL_ZSTD_MAGIC) return kl_fail(e, KF_ZSTD_MAGIC, p, kl_le32(src + p), 0);
    f->start = p;
    if (n - p < 6) return kl_fail(e, KF_ZSTD_HEADER_TRUNC, p, 0, 0);
    fhd = src[p + 4];
    if (fhd & 0x08u) return kl_fail(e, KF_ZSTD_RESERVED, p, 0, 0);
    f->dict = (fhd & 0x03u) != 0;
    fcs = fcs_sizes[fhd >> 6];
    if (fcs == 0 && (fhd & 0x20u)) fcs = 1;
    p += 5 + ((fhd & 0x20u) ? 0 : 1) + dict_sizes[fhd & 0x03u];
    if (p > n || n - p < fcs) return kl_fail(e, KF_ZSTD_HEADER_TRUNC, f->start, 0, 0);
    f->has_size = fcs != 0;
    f->content_size = 0;
    for (i = 0; i < fcs; i++) f->content_size |= (uint64_t)src[p + i] << (8 * i);
    if (fcs == 2) f->content_size += 256;
    p += fcs;
    f->bound = 0;
    for (;;) {
        if (n - p < 3) return kl_fail(e, KF_ZSTD_TRUNC, f->start, 0, 0);
        h = (uint32_t)src[p] | ((uint32_t)src[p + 1] << 8) | ((uint32_t)src[p + 2] << 16);
        btype = (h >> 1) & 3u;
        bsize = h >> 3;
        if (btype == 3) return kl_fail(e, KF_ZSTD_BLOCK_TYPE, p, 0, 0);
        if (bsize > KL_ZSTD_BLOCK_MAX) return kl_fail(e, KF_ZSTD_BLOCK_BIG, p, bsize, 0);
        /* RLE: one byte repeated bsize times; raw: bsize bytes; compressed: bsize bytes
           in, at most one full block out */
        f->bound += btype == 2 ? KL_ZSTD_BLOCK_MAX : bsize;
        bsize = btype == 1 ? 1 : bsize;
        if (bsize > n - p - 3) return kl_fail(e, KF_ZSTD_BLOCK_PAST, p, 0, 0);
        p += 3 + bsize;
        if (h & 1u) break;
    }
    if (fhd & 0x04u) {
        if (n - p < 4) return kl_fail(e, KF_ZSTD_CSUM_TRUNC, f->start, 0, 0);
        p += 4;
    }
    f->end = p;
    *pos = p;
    return 1;
}

/* When src[0:n] is exactly one zstd frame that declares its content size and needs no
   dictionary, that size; else -1 (the codec registry takes the payload). */
static int64_t kl_zstd_sized_frame(const uint8_t* src, size_t n) {
    size_t pos = 0;
    kl_zstd_frame f;
    kl_ferr e;
    if (n < 4 || kl_le32(src) != KL_ZSTD_MAGIC) return -1;
    if (kl_zstd_next(src, n, &pos, &f, &e) != 1 || pos != n || f.dict || !f.has_size
            || f.content_size > (uint64_t)INT64_MAX)
        return -1;
    return (int64_t)f.content_size;
}
#endif
