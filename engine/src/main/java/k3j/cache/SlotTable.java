package k3j.cache;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Which key each slot holds, with no I/O (docs/semantics.md §6.2): a key (≥ 0), EMPTY or INFLIGHT. An
 * INFLIGHT slot is never handed out, served or evicted. The live cache drives it under its lock;
 * {@code k3 sim-cache} drives the same table to replay a trace, so both make the same choices.
 */
final class SlotTable {
    static final int EMPTY = -1;
    static final int INFLIGHT = -2;

    /** A reservation of {@code slot} for {@code key}: the key it evicted (or −1), and whether that key was prefetched and never requested. */
    record Reservation(int key, int slot, int evictedKey, boolean wastedPrefetch) {}

    private final int[] keyOf;
    private final int[] slotOf;
    private final int[] inflightOf;
    private final boolean[] prefetched;
    private final ReplacementPolicy policy;
    // the ring of the last `ring.length` handed-out slots; protected[s] counts s's entries in it
    private final int[] ring;
    private final int[] protectedCount;
    private int ringNext;
    private int ringFill;
    private int inflight;
    private int resident;

    SlotTable(int slots, int keys, int protectedSlots, CachePolicy policy) {
        keyOf = new int[slots];
        Arrays.fill(keyOf, EMPTY);
        slotOf = new int[keys];
        Arrays.fill(slotOf, -1);
        inflightOf = new int[keys];
        Arrays.fill(inflightOf, -1);
        prefetched = new boolean[slots];
        ring = new int[protectedSlots];
        protectedCount = new int[slots];
        this.policy = policy.create(slots, keys, protectedSlots);
    }

    int slots() {
        return keyOf.length;
    }

    int keyOf(int slot) {
        return keyOf[slot];
    }

    /** The slot holding {@code key}, or −1. */
    int residentSlot(int key) {
        return slotOf[key];
    }

    boolean inflight(int key) {
        return inflightOf[key] >= 0;
    }

    int inflightCount() {
        return inflight;
    }

    int residentCount() {
        return resident;
    }

    boolean evictable(int slot) {
        return keyOf[slot] != INFLIGHT && protectedCount[slot] == 0;
    }

    /** Serve a resident key: policy touch, then into the protection ring. */
    void serve(int slot) {
        boolean firstUse = prefetched[slot];
        prefetched[slot] = false;
        policy.hit(slot, firstUse);
        handOut(slot);
    }

    /** Reserve a slot for {@code key} and mark it INFLIGHT, or null if every slot is in flight or protected. */
    Reservation reserve(int key) {
        int s = policy.victim(this);
        if (s < 0) return null;
        int old = keyOf[s];
        if (old == INFLIGHT) throw new IllegalStateException("policy returned in-flight slot " + s);
        boolean wasted = old >= 0 && prefetched[s];
        if (old >= 0) {
            slotOf[old] = -1;
            resident--;
        }
        keyOf[s] = INFLIGHT;
        inflightOf[key] = s;
        prefetched[s] = false;
        inflight++;
        policy.reserved(s);
        return new Reservation(key, s, old, wasted);
    }

    /** A full read of {@code key} landed in {@code slot}. */
    void publish(int slot, int key, boolean byPrefetch) {
        check(slot, key);
        keyOf[slot] = key;
        slotOf[key] = slot;
        inflightOf[key] = -1;
        prefetched[slot] = byPrefetch;
        inflight--;
        resident++;
        policy.admitted(slot, key, byPrefetch);
    }

    /** The read of {@code key} failed: the slot goes back to EMPTY, nothing is published. */
    void abandon(int slot, int key) {
        check(slot, key);
        keyOf[slot] = EMPTY;
        inflightOf[key] = -1;
        inflight--;
        policy.freed(slot);
    }

    private void check(int slot, int key) {
        if (keyOf[slot] != INFLIGHT || inflightOf[key] != slot) {
            throw new IllegalStateException("slot " + slot + " is not in flight for key " + key);
        }
    }

    void handOut(int slot) {
        if (ringFill == ring.length) protectedCount[ring[ringNext]]--;
        else ringFill++;
        ring[ringNext] = slot;
        protectedCount[slot]++;
        ringNext = (ringNext + 1) % ring.length;
    }

    /**
     * Phase 1 of a batch prefetch (docs/semantics.md §6.5): reserves an INFLIGHT slot for each key that is
     * neither resident, in flight nor a repeat (−1 entries are skipped), in order, stopping at the
     * first key no slot can be found for. The batch's resident members are shielded meanwhile, so
     * reserving for one member never evicts another that is about to be requested.
     */
    List<Reservation> reserveBatch(int[] keys) {
        List<Integer> shielded = new ArrayList<>();
        for (int k : keys) {
            int s = k >= 0 ? slotOf[k] : -1;
            if (s >= 0 && !shielded.contains(s)) {
                shield(s);
                shielded.add(s);
            }
        }
        List<Reservation> out = new ArrayList<>();
        try {
            Set<Integer> seen = new HashSet<>();
            for (int k : keys) {
                if (k < 0 || !seen.add(k) || slotOf[k] >= 0 || inflightOf[k] >= 0) continue;
                Reservation r = reserve(k);
                if (r == null) break;
                out.add(r);
            }
        } finally {
            for (int s : shielded) unshield(s);
        }
        return out;
    }

    private void shield(int slot) {
        protectedCount[slot]++;
    }

    private void unshield(int slot) {
        protectedCount[slot]--;
    }

    void clearRing() {
        for (int i = 0; i < ringFill; i++) protectedCount[ring[i]]--;
        ringFill = 0;
        ringNext = 0;
    }

    String describePolicy() {
        return policy.describe();
    }
}
