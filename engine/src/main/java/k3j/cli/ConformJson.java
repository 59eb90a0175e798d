package k3j.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import k3j.api.Conform;
import k3j.api.internal.ApiInternals;
import k3j.compare.Conformance;
import k3j.io.AtomicWrite;
import k3j.verdict.PlanVerdict;
import k3j.verdict.Verdict;

/**
 * {@code k3 conform --json FILE} (docs/formats.md §15, §18): written before the first layer with the run's plan and
 * an INCOMPLETE verdict naming every planned item, rewritten whole at the end with the one verdict the run printed.
 * A run interrupted or crashed leaves the INCOMPLETE verdict, never a green one.
 */
final class ConformJson {
    static final String PLAN_LOGITS_FULL = "logits, full recompute", PLAN_LOGITS_INCREMENTAL = "logits, incremental", PLAN_GREEDY = "greedy ids";
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private final Path json;
    private final List<String> planned = new ArrayList<>();
    private ObjectNode runPlan;

    ConformJson(Path json) {
        this.json = json;
    }

    /** A run refused before anything was graded: its verdict alone. */
    static void refused(Path json, Verdict decision) throws IOException {
        var root = MAPPER.createObjectNode();
        root.set("verdict", MAPPER.valueToTree(decision.json()));
        AtomicWrite.string(json, "--json", MAPPER.writerWithDefaultPrettyPrinter().writeValueAsString(root));
    }

    /** The plan (a run id, the model or candidate, the reference, every planned item) and its verdict so far: nothing judged. */
    void start(Conform judge, List<Integer> sel, Path model, Path candidate, boolean experts, k3j.fleet.WorkPlan.Part shardPart) throws IOException {
        Conformance c = ApiInternals.get().conformance(judge);
        runPlan = MAPPER.createObjectNode();
        runPlan.put("run", java.util.UUID.randomUUID().toString());
        runPlan.put("model", model == null ? (String) null : model.toString());
        runPlan.put("candidate", candidate == null ? (String) null : candidate.toString());
        runPlan.put("reference", c.dump().source().toString());
        runPlan.put("reference_producer", c.dump().producer());
        for (int l : sel) planned.add("L" + l);
        if (experts && shardPart != null) for (var x : shardPart.experts()) planned.add("L" + x.layer() + " experts " + x.from() + "-" + (x.to() - 1));
        else if (experts) for (int l : c.moeLayers(sel)) planned.add("L" + l + " experts");
        if (judge.hasLogits() && (shardPart == null || shardPart.logits())) planned.addAll(List.of(PLAN_LOGITS_FULL, PLAN_LOGITS_INCREMENTAL, PLAN_GREEDY));
        var items = runPlan.putArray("items");
        planned.forEach(items::add);
        var root = MAPPER.createObjectNode();
        root.set("run_plan", runPlan);
        root.set("verdict", MAPPER.valueToTree(PlanVerdict.of(planned, Map.of(), false, true).verdict().against(c.dump().producer(), c.dump().promptId()).json()));
        AtomicWrite.string(json, "--json", MAPPER.writerWithDefaultPrettyPrinter().writeValueAsString(root));
    }

    /**
     * The report: the plan and the verdict the run printed (not a second one), every layer's finding, message, seconds
     * and stage ratios (doubles as computed), the summary a merge of shards reproduces, and the memory plan.
     */
    void finish(k3j.fleet.Judged all, List<Integer> sel, Conform judge, Verdict decision) throws IOException {
        var root = MAPPER.createObjectNode();
        root.set("run_plan", runPlan);
        root.set("verdict", MAPPER.valueToTree(decision.json()));
        k3j.fleet.Judged.putLayers(root.putArray("layers"), all.layers());
        k3j.fleet.Summary.putVerdict(root, all, sel, decision, List.of());
        k3j.plan.MemInfo.peakRss().ifPresent(p -> root.put("peak_rss_bytes", p));
        var p = ApiInternals.get().plan(judge);
        if (p != null) {
            var plan = root.putObject("plan");
            plan.put("total_bytes", p.total());
            plan.put("trunk_streamed", p.trunkStreamed());
            plan.put("trunk_bytes", p.trunk());
            plan.put("model_tables_bytes", p.modelTables());
            plan.put("expert_cache_bytes", p.expertCache());
            plan.put("buffers_bytes", p.buffers() + p.recurrentState() + p.kvCache());
            plan.put("jvm_bytes", p.jvm().bytes());
            plan.put("jvm_heap_max_bytes", p.jvm().heapMax());
            var a = ApiInternals.get().assembly(judge);
            if (a != null && a.trunk() != null && a.trunk().binding() != null) {
                var b = a.trunk().binding();
                var tb = root.putObject("trunk_binding");
                tb.put("check", b.mode().flag());
                tb.put("shards_changed_since_pack", b.changedShards().size());
                tb.put("tensors_hashed", b.tensorsHashed());
                tb.put("bytes_hashed", b.bytesHashed());
            }
            if (a != null && a.cache() != null) {
                var s = a.cache().totalStats();
                var cache = root.putObject("expert_cache");
                cache.put("slots", a.cache().geometry().slots());
                cache.put("slot_bytes", a.cache().geometry().slotBytes());
                cache.put("requests", s.requests());
                cache.put("misses", s.misses());
                cache.put("evictions", s.evictions());
                cache.put("bytes_read", s.bytesRead());
            }
        }
        AtomicWrite.string(json, "--json", MAPPER.writerWithDefaultPrettyPrinter().writeValueAsString(root));
    }
}
