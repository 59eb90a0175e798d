package k3j.api.internal;

import java.nio.file.Path;
import java.util.List;
import java.util.function.ToLongFunction;
import k3j.api.Chat;
import k3j.api.Conform;
import k3j.api.ConformReport;
import k3j.api.Engine;
import k3j.api.Plan;
import k3j.api.State;
import k3j.chat.Xtml;
import k3j.compare.Conformance;
import k3j.compare.ExpertLayerReport;
import k3j.compare.LayerReport;
import k3j.compare.LossyReport;
import k3j.config.ModelConfig;
import k3j.dump.ReferenceDump;
import k3j.kernels.Workers;
import k3j.model.Assembly;
import k3j.model.DecodeState;
import k3j.model.Forward;
import k3j.plan.MemoryPlan;
import k3j.tokenizer.Tokenizer;
import k3j.verdict.Verdict;

/**
 * What k3j's own tools (the {@code k3} command and the other front doors, the gates) reach under {@link k3j.api}: the engine's parts behind an
 * {@link Engine}, a {@link Conform} or a report. The API's signatures name only its own types and the JDK's; this is
 * the one door to the rest, opened by the API itself ({@code k3j.api.Internals}), so a user of the API never meets
 * an engine-internal type.
 */
public final class ApiInternals {
    /** The engine-internal view of the API's objects; implemented in k3j.api only. */
    public interface Access {
        Engine open(Path modelDir, ModelConfig config, Plan plan, Engine.Options o, Tokenizer tokenizer, Assembly.Intercepts intercepts);

        Assembly assembly(Engine e);

        Forward forward(Engine e);

        MemoryPlan plan(Engine e);

        ModelConfig config(Engine e);

        Tokenizer tokenizer(Engine e);

        State state(int[] ids, DecodeState decode);

        DecodeState decode(State s);

        Xtml xtml(Chat c);

        Conform conform(Path modelDir, ReferenceDump dump, Plan plan, Conform.Options o, ToLongFunction<Assembly> scratch, Workers workers);

        Conform conform(Path modelDir, ReferenceDump dump, Plan plan, Conform.Options o);

        Conformance conformance(Conform c);

        Assembly assembly(Conform c);

        MemoryPlan plan(Conform c);

        LossyReport lossy(Conform c, List<Integer> selection);

        LayerReport layer(ConformReport.Layer l);

        ExpertLayerReport experts(ConformReport.Experts e);

        Verdict verdict(ConformReport r);

        /** The comparison behind a logits report, or null when its stage is missing. */
        k3j.compare.LogitParity.Result logits(ConformReport.Logits l);

        /** The comparison behind a greedy report, or null when its stage is missing. */
        k3j.compare.LogitParity.Greedy greedy(ConformReport.Greedy g);
    }

    private static volatile Access access;

    private ApiInternals() {}

    /** Called once, by k3j.api's own implementation (no other is taken). */
    public static void register(Access a) {
        if (!a.getClass().getName().equals("k3j.api.Internals")) throw new IllegalArgumentException("only k3j.api.Internals gives the API's internals");
        if (access != null) throw new IllegalStateException("k3j.api's internals are registered once");
        access = a;
    }

    /** The view, k3j.api's registration run first when it has not run yet. */
    public static Access get() {
        if (access == null) {
            try {
                Class.forName("k3j.api.Internals", true, Engine.class.getClassLoader());
            } catch (ClassNotFoundException e) {
                throw new IllegalStateException("k3j.api.Internals is missing from the build", e);
            }
        }
        return access;
    }
}
