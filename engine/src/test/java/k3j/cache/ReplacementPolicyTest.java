package k3j.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Random;
import org.junit.jupiter.api.Test;

class ReplacementPolicyTest {
    /** One serial get() against the table, as the live cache does it; true on a hit. */
    static boolean access(SlotTable t, int key) {
        int s = t.residentSlot(key);
        if (s >= 0) {
            t.serve(s);
            return true;
        }
        SlotTable.Reservation r = t.reserve(key);
        t.publish(r.slot(), key, false);
        t.handOut(r.slot());
        return false;
    }

    @Test
    void s3FifoPromotesOnFrequencyAndAdmitsGhostsToMain() {
        SlotTable t = new SlotTable(10, 100, 1, CachePolicy.S3_FIFO);
        for (int k = 0; k < 10; k++) assertEquals(false, access(t, k)); // cold fill from the free list
        assertTrue(access(t, 0)); // freq(0) = 1
        assertTrue(access(t, 5)); // the ring now protects 5, not 0
        // miss: SMALL head 0 has freq 1 -> reset, moved to MAIN; next head 1 has freq 0 -> evicted, ghosted
        assertEquals(false, access(t, 10));
        assertEquals(-1, t.residentSlot(1));
        assertTrue(t.residentSlot(0) >= 0);
        // 1 comes back: victim is SMALL head 2 (ghosted); 1 was a ghost, so it is admitted to MAIN
        assertEquals(false, access(t, 1));
        assertEquals(-1, t.residentSlot(2));
        assertTrue(t.describePolicy().endsWith("small 8 of 1 target, main 2, ghost 1 keys"), t.describePolicy());
    }

    @Test
    void protectedAndInflightSlotsAreNeverVictims() {
        for (CachePolicy p : CachePolicy.values()) {
            SlotTable t = new SlotTable(3, 10, 2, p);
            access(t, 0);
            SlotTable.Reservation inflight = t.reserve(1); // INFLIGHT, not published
            access(t, 2);
            // slots: 0 resident (ring), 1 in flight, 2 resident (ring): nothing can be evicted
            assertNull(t.reserve(3), p.label());
            t.publish(inflight.slot(), 1, false);
            assertEquals(0, t.inflightCount());
            assertEquals(3, t.residentCount());
            SlotTable.Reservation r = t.reserve(3); // 1 is the only unprotected slot
            assertEquals(inflight.slot(), r.slot(), p.label());
            assertEquals(1, r.evictedKey(), p.label());
        }
    }

    @Test
    void lruReplayEqualsTextbookLru() {
        // with the ring = last k served, LRU never wants a protected slot: the engine's LRU is plain LRU
        Random rnd = new Random(7);
        for (int trial = 0; trial < 50; trial++) {
            int cap = 2 + rnd.nextInt(12), topK = 1 + rnd.nextInt(cap - 1), keys = 3 + rnd.nextInt(40);
            SlotTable t = new SlotTable(cap, keys, CacheGeometry.protectedSlots(topK, cap), CachePolicy.LRU);
            LinkedHashMap<Integer, Boolean> ref = new LinkedHashMap<>(16, 0.75f, true);
            for (int i = 0; i < 400; i++) {
                int k = rnd.nextDouble() < 0.5 ? rnd.nextInt(Math.min(keys, cap + 2)) : rnd.nextInt(keys);
                boolean want = ref.get(k) != null;
                if (!want) {
                    if (ref.size() >= cap) {
                        Iterator<Integer> it = ref.keySet().iterator();
                        it.next();
                        it.remove();
                    }
                    ref.put(k, true);
                }
                assertEquals(want, access(t, k), "trial " + trial + " request " + i);
            }
        }
    }

    @Test
    void windowLfuKeepsAStableSetOfALoopLargerThanTheCacheWhereLruKeepsNothing() {
        // 20 keys in a loop through 10 slots: LRU evicts every key just before it comes back
        int lru = 0, wlfu = 0;
        SlotTable l = new SlotTable(10, 20, 1, CachePolicy.LRU), w = new SlotTable(10, 20, 1, CachePolicy.WINDOW_LFU);
        for (int round = 0; round < 10; round++) {
            for (int k = 0; k < 20; k++) {
                if (access(l, k) && round >= 2) lru++;
                if (access(w, k) && round >= 2) wlfu++;
            }
        }
        assertEquals(0, lru);
        // a window of 2 slots (a quarter of 10, rounded down) leaves 8 for a stable main part: 8 hits a round
        assertEquals(8 * 8, wlfu, w.describePolicy());
    }

    @Test
    void windowLfuCountsReuseEpisodesNotRepeatsInsideTheWindow() {
        SlotTable t = new SlotTable(8, 300, 1, CachePolicy.WINDOW_LFU); // window: 2 slots
        for (int k = 0; k < 6; k++) access(t, k);
        for (int k = 0; k < 6; k++) assertTrue(access(t, k)); // a second episode each: 0..5 have 2
        for (int i = 0; i < 10; i++) access(t, 100);            // ten requests but one episode
        access(t, 200);
        access(t, 201);
        // a raw request count (10) would have 100 displace one of 0..5; its one episode does not
        assertEquals(-1, t.residentSlot(100), t.describePolicy());
        for (int k = 0; k < 6; k++) assertTrue(t.residentSlot(k) >= 0, "key " + k);
        assertTrue(t.residentSlot(200) >= 0 && t.residentSlot(201) >= 0);
    }
}
