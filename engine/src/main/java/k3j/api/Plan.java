package k3j.api;

import java.nio.file.Path;
import java.util.function.Consumer;
import k3j.model.Residency;
import k3j.plan.Preset;
import k3j.trunk.StreamOptions;

/**
 * How an engine holds the model's weights: every decoder layer resident (bound from the shards), or the trunk
 * streamed from a packed folder ({@code k3 pack-trunk}) within {@code trunkGb}; the routed experts resident, or
 * served by an expert cache of {@code cacheGb}. The output is the same bits under every plan.
 *
 * @param trunk      the packed trunk folder, or null: resident
 * @param trunkGb    the trunk budget in GB (1e9 bytes), when streamed
 * @param cacheGb    the routed-expert cache budget in GB
 * @param cacheGiven the experts go through the cache even when all of them would fit in it
 * @param ultra      the embedding and LM-head tables read on demand in bounded chunks
 * @param ring       trunk ring slots wanted (0 means 2)
 * @param preset     the preset's name, or null
 * @param verifyTrunk how the streamed trunk's binding to the checkpoint's data is checked at open (docs/formats.md, "Trunk binding")
 */
public record Plan(Path trunk, double trunkGb, double cacheGb, boolean cacheGiven, boolean ultra, int ring, String preset, TrunkCheck verifyTrunk) {
    static final double DEFAULT_TRUNK_GB = 16, DEFAULT_CACHE_GB = 64;

    /** Checks the budgets are positive, the ring not negative, an ultra plan's trunk given, and the trunk check named. */
    public Plan {
        if (!(trunkGb > 0) || !(cacheGb > 0)) throw new IllegalArgumentException("budgets must be positive, got trunk " + trunkGb + " GB, cache " + cacheGb + " GB");
        if (ring < 0) throw new IllegalArgumentException("ring must be >= 0, got " + ring);
        if (ultra && trunk == null) throw new IllegalArgumentException("ultra streams the trunk: give its folder");
        if (verifyTrunk == null) throw new IllegalArgumentException("verifyTrunk must be given (FAST by default)");
    }

    /**
     * A plan with the default, fast trunk binding check.
     *
     * @param trunk      the packed trunk folder, or null: resident
     * @param trunkGb    the trunk budget in GB, when streamed
     * @param cacheGb    the routed-expert cache budget in GB
     * @param cacheGiven the experts go through the cache even when all of them would fit in it
     * @param ultra      the embedding and LM-head tables read on demand in bounded chunks
     * @param ring       trunk ring slots wanted (0 means 2)
     * @param preset     the preset's name, or null
     */
    public Plan(Path trunk, double trunkGb, double cacheGb, boolean cacheGiven, boolean ultra, int ring, String preset) {
        this(trunk, trunkGb, cacheGb, cacheGiven, ultra, ring, preset, TrunkCheck.FAST);
    }

    /**
     * This plan with the trunk binding checked as {@code check}.
     *
     * @param check how the trunk's binding is checked
     * @return a copy of this plan with that check
     */
    public Plan withVerifyTrunk(TrunkCheck check) {
        return new Plan(trunk, trunkGb, cacheGb, cacheGiven, ultra, ring, preset, check);
    }

    /** {@return a plan with everything resident: the experts go through a 64 GB cache only when they do not all fit in it} */
    public static Plan resident() {
        return new Plan(null, DEFAULT_TRUNK_GB, DEFAULT_CACHE_GB, false, false, 2, null);
    }

    /**
     * The trunk streamed from {@code trunk} within {@code trunkGb}, the experts through a {@code cacheGb} cache.
     *
     * @param trunk the packed trunk folder ({@code k3 pack-trunk})
     * @param trunkGb the trunk budget in GB
     * @param cacheGb the expert cache budget in GB
     * @return the plan
     */
    public static Plan streamed(Path trunk, double trunkGb, double cacheGb) {
        return new Plan(trunk, trunkGb, cacheGb, true, false, 2, null);
    }

    /**
     * A named preset (ultra, laptop, desktop, workstation, server, max) over the packed trunk in {@code trunk}.
     *
     * @param name the preset's name
     * @param trunk the packed trunk folder
     * @return the preset's plan
     */
    public static Plan preset(String name, Path trunk) {
        Preset p = Preset.parse(name);
        return new Plan(trunk, p.trunkGb(), p.cacheGb(), true, p.ultra(), 2, p.id());
    }

    /** {@return whether the trunk is streamed from a packed folder} */
    public boolean streamed() {
        return trunk != null;
    }

    /** {@return the trunk budget in bytes} */
    public long trunkBytes() {
        return Math.round(trunkGb * 1e9);
    }

    /** {@return the expert cache budget in bytes} */
    public long cacheBytes() {
        return Math.round(cacheGb * 1e9);
    }

    /**
     * How a runtime holds its weights under this plan (the trunk's notes, prefixed "k3: note: ", to {@code notes});
     * with {@code witness} every trunk layer read is compared with the checkpoint's own bytes before it is used
     * (what a verdict needs: k3j.trunk.ShardWitness).
     */
    Residency residency(boolean verifyCrc, boolean witness, Consumer<String> notes) {
        StreamOptions opts = trunk == null ? null
                : StreamOptions.budget(trunkBytes()).withRing(ring).withNotes(s -> notes.accept("k3: note: " + s)).withVerifyCrc(verifyCrc)
                        .withCheck(verifyTrunk.check()).withWitness(witness);
        return new Residency(trunk, opts, cacheBytes(), cacheGiven, ultra);
    }

    /**
     * This plan with an expert cache of {@code gb} (the experts then always go through it).
     *
     * @param gb the expert cache budget in GB
     * @return this plan with that cache
     */
    public Plan withCacheGb(double gb) {
        return new Plan(trunk, trunkGb, gb, true, ultra, ring, preset, verifyTrunk);
    }
}
