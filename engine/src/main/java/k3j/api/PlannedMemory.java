package k3j.api;

import k3j.plan.Human;
import k3j.plan.MemoryPlan;

/**
 * The memory plan a model was opened under: the bytes each part is planned to hold, made from the model's own
 * sizes before anything large is allocated (docs/semantics.md, the memory plan). The plan is a forecast; the
 * peak RSS a run measures is set against {@link #totalBytes()}.
 *
 * @param trunkBytes          the decoder layers' weights held (the ring of a streamed trunk, or all of them resident)
 * @param trunkStreamed       whether the trunk is streamed from a packed folder rather than resident
 * @param modelTablesBytes    the embedding and LM-head tables (their chunk buffers when streamed)
 * @param tablesStreamed      whether those tables are read on demand in bounded chunks
 * @param expertCacheBytes    the routed experts: the expert cache's arena, or all of them resident
 * @param recurrentStateBytes the KDA layers' recurrent state
 * @param buffersBytes        the forward's activations and scratch buffers
 * @param kvCacheBytes        the MLA layers' KV cache (incremental decoding only)
 * @param positions           the positions the plan is made for
 * @param jvmBytes            the JVM's own footprint before the model is allocated
 * @param totalBytes          the sum of every part above (and a bisect candidate's scratch, when one is planned)
 */
public record PlannedMemory(long trunkBytes, boolean trunkStreamed, long modelTablesBytes, boolean tablesStreamed, long expertCacheBytes,
                            long recurrentStateBytes, long buffersBytes, long kvCacheBytes, int positions, long jvmBytes, long totalBytes) {
    static PlannedMemory of(MemoryPlan p) {
        return p == null ? null : new PlannedMemory(p.trunk(), p.trunkStreamed(), p.modelTables(), p.ultra(), p.expertCache(), p.recurrentState(), p.buffers(),
                p.kvCache(), p.positions(), p.jvm().bytes(), p.total());
    }

    /** One line: the total, then the trunk, the experts and the KV cache. */
    @Override
    public String toString() {
        return "PlannedMemory[total " + Human.bytes(totalBytes) + " for " + positions + " position(s): trunk " + Human.bytes(trunkBytes)
                + (trunkStreamed ? " (streamed)" : " (resident)") + ", experts " + Human.bytes(expertCacheBytes) + ", KV cache " + Human.bytes(kvCacheBytes) + "]";
    }
}
