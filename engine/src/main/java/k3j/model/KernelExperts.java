package k3j.model;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import k3j.cache.ExpertForm;
import k3j.cache.ExpertLocation;
import k3j.cache.ExpertPart;
import k3j.cache.ResidentExpert;
import k3j.kernels.Layers;
import k3j.kernels.Mxfp4;

/**
 * The kernel-ready form of a routed expert (docs/semantics.md §6.1): its three MXFP4 matrices repacked for the
 * across-rows kernel, in {@code codes} form, one after the other: w1 codes, w1 scales, w3 codes, w3 scales,
 * w2 codes, w2 scales, each piece at a 64-byte boundary. The expert cache makes it once per slot fill, so a hit
 * hands the kernel these bytes with no repack.
 *
 * @param intermediate w1 and w3 rows, w2 columns
 * @param latent       w1 and w3 columns, w2 rows
 */
public record KernelExperts(int intermediate, int latent, Mxfp4.Codes codes) implements ExpertForm {

    private long[] pieces() { // byte sizes: w1 codes, w1 scales, w3 codes, w3 scales, w2 codes, w2 scales
        long up = Mxfp4.packedBytes(intermediate, latent, codes), upS = Mxfp4.scaleBytes(intermediate, latent);
        return new long[] {up, upS, up, upS, Mxfp4.packedBytes(latent, intermediate, codes), Mxfp4.scaleBytes(latent, intermediate)};
    }

    private static long align(long n) {
        return (n + 63) & ~63L;
    }

    @Override
    public long bytes(ExpertLocation loc) {
        long at = 0;
        for (long p : pieces()) at = align(at) + p;
        return at;
    }

    @Override
    public void fill(ExpertLocation loc, MemorySegment stored, MemorySegment dst) {
        Mxfp4.Repacked[] m = view(dst);
        ExpertPart[][] parts = {{ExpertPart.W1_PACKED, ExpertPart.W1_SCALE}, {ExpertPart.W3_PACKED, ExpertPart.W3_SCALE}, {ExpertPart.W2_PACKED, ExpertPart.W2_SCALE}};
        for (int i = 0; i < 3; i++) {
            MemorySegment p = stored.asSlice(loc.partOffset(parts[i][0]), loc.partLength(parts[i][0]));
            MemorySegment s = stored.asSlice(loc.partOffset(parts[i][1]), loc.partLength(parts[i][1]));
            Mxfp4.repackInto(p, s, m[i].rows(), m[i].in(), codes, m[i].packed(), m[i].scales());
        }
    }

    /** w1, w3, w2 over a slot's bytes in this form. */
    private Mxfp4.Repacked[] view(MemorySegment bytes) {
        long[] size = pieces();
        MemorySegment[] seg = new MemorySegment[6];
        long at = 0;
        for (int i = 0; i < 6; i++) {
            at = align(at);
            seg[i] = bytes.asSlice(at, size[i]);
            at += size[i];
        }
        return new Mxfp4.Repacked[] {new Mxfp4.Repacked(seg[0], seg[1], intermediate, latent, codes),
            new Mxfp4.Repacked(seg[2], seg[3], intermediate, latent, codes), new Mxfp4.Repacked(seg[4], seg[5], latent, intermediate, codes)};
    }

    /** The kernel's view of an expert held in this form. */
    public Layers.Expert expert(ResidentExpert r) {
        Mxfp4.Repacked[] m = view(r.bytes());
        return new Layers.Expert(m[0], m[1], m[2]);
    }

    /** Whether every code of an expert held in this form is ±0 (padding is zero too). */
    public boolean codesAllZero(ResidentExpert r) {
        for (Mxfp4.Repacked m : view(r.bytes())) {
            MemorySegment b = m.packed();
            long n = b.byteSize(), i = 0;
            for (; i + 8 <= n; i += 8) if (b.get(ValueLayout.JAVA_LONG_UNALIGNED, i) != 0) return false;
            for (; i < n; i++) if (b.get(ValueLayout.JAVA_BYTE, i) != 0) return false;
        }
        return true;
    }

    @Override
    public String toString() {
        return "MXFP4 repacked (" + codes.name().toLowerCase(java.util.Locale.ROOT) + ")";
    }
}
