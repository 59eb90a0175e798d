package k3j.api;

import java.nio.file.Path;
import java.util.List;
import java.util.function.ToLongFunction;
import k3j.api.internal.ApiInternals;
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

/** The engine-internal view of this package's objects, for k3j's own tools ({@link ApiInternals}); not part of the API. */
final class Internals implements ApiInternals.Access {
    static {
        ApiInternals.register(new Internals());
    }

    private Internals() {}

    @Override
    public Engine open(Path modelDir, ModelConfig config, Plan plan, Engine.Options o, Tokenizer tokenizer, Assembly.Intercepts intercepts) {
        return Engine.open(modelDir, config, plan, o, tokenizer, intercepts);
    }

    @Override
    public Assembly assembly(Engine e) {
        return e.assembly();
    }

    @Override
    public Forward forward(Engine e) {
        return e.forward();
    }

    @Override
    public MemoryPlan plan(Engine e) {
        return e.memoryPlan();
    }

    @Override
    public ModelConfig config(Engine e) {
        return e.config();
    }

    @Override
    public Tokenizer tokenizer(Engine e) {
        return e.tokenizer();
    }

    @Override
    public State state(int[] ids, DecodeState decode) {
        return new State(ids, decode);
    }

    @Override
    public DecodeState decode(State s) {
        return s.decode();
    }

    @Override
    public Xtml xtml(Chat c) {
        return c.xtml();
    }

    @Override
    public Conform conform(Path modelDir, ReferenceDump dump, Plan plan, Conform.Options o, ToLongFunction<Assembly> scratch, Workers workers) {
        return Conform.model(modelDir, dump, plan, o, scratch, workers);
    }

    @Override
    public Conform conform(Path modelDir, ReferenceDump dump, Plan plan, Conform.Options o) {
        return Conform.model(modelDir, dump, plan, o);
    }

    @Override
    public Conformance conformance(Conform c) {
        return c.conformance();
    }

    @Override
    public Assembly assembly(Conform c) {
        return c.assembly();
    }

    @Override
    public MemoryPlan plan(Conform c) {
        return c.memoryPlan();
    }

    @Override
    public LossyReport lossy(Conform c, List<Integer> selection) {
        return c.lossy(selection);
    }

    @Override
    public LayerReport layer(ConformReport.Layer l) {
        return l.report();
    }

    @Override
    public ExpertLayerReport experts(ConformReport.Experts e) {
        return e.report();
    }

    @Override
    public Verdict verdict(ConformReport r) {
        return r.decided();
    }

    @Override
    public k3j.compare.LogitParity.Result logits(ConformReport.Logits l) {
        return l.result();
    }

    @Override
    public k3j.compare.LogitParity.Greedy greedy(ConformReport.Greedy g) {
        return g.result();
    }
}
