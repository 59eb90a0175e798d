package k3j.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import k3j.api.Conform;
import k3j.api.ConformReport;
import k3j.api.internal.ApiInternals;
import k3j.compare.Conformance;
import k3j.compare.SelfDivergence;
import k3j.verdict.Invariants;
import k3j.verdict.Verdict;

/**
 * {@code k3 conform --candidate A --against B} (docs/semantics.md §10.13): where two candidates of one engine part,
 * then each judged against the reference; one decision over the three, so exit 0 only when they do not part (over
 * every layer both hold) and both conform.
 */
final class ConformAgainst {
    private ConformAgainst() {}

    static int run(Path candidate, Path against, Conform.Options o, LayerScope scope, PrintWriter out) {
        try (Conform a = Conform.candidate(candidate, o); Conform b = Conform.candidate(against, o)) {
            Conformance ca = ApiInternals.get().conformance(a);
            out.println("A         : " + ca.engine());
            out.println("B         : " + ApiInternals.get().conformance(b).engine());
            out.println("reference : " + ca.dump().source() + " (" + ca.dump().producer() + ")");
            SelfDivergence d = SelfDivergence.of(ca, ApiInternals.get().conformance(b));
            out.print(d.text());
            List<Invariants.Item> items = new ArrayList<>();
            int layerCount = ca.layerCount();
            items.add(d.parting() != null ? Invariants.Item.fail("A and B", "they part: " + d.parting().text())
                    : !d.notCompared().isEmpty() ? Invariants.Item.notJudged("A and B", d.notCompared().size() + " stage(s) or layer(s) held by one only: " + d.notCompared().getFirst())
                    : d.layersCompared() < layerCount ? Invariants.Item.notJudged("A and B", "only " + d.layersCompared() + " of " + layerCount + " layers are held by both")
                    : Invariants.Item.pass("A and B"));
            for (Conform c : List.of(a, b)) {
                String name = c == a ? "A" : "B";
                ConformReport r = c.report(c.layers(scope.select(ApiInternals.get().conformance(c).layerCount()), x -> {}), 0);
                Verdict v = ApiInternals.get().verdict(r);
                ConformReport.Layer first = r.firstDivergence();
                out.println(name + " against the reference: " + v.line()
                        + (first != null ? "; FIRST DIVERGENCE: " + first.name() + (first.firstDivergence() != null ? " " + first.firstDivergence() : "") + " " + first.finding().tag() : ""));
                items.add(Invariants.of(name + " against the reference", v));
            }
            Verdict verdict = Invariants.decide(Invariants.Mode.FLOAT32, items).against(ca.dump().producer(), ca.dump().promptId());
            out.println();
            out.print(verdict.text());
            return verdict.exitCode();
        }
    }
}
