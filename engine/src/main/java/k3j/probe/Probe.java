package k3j.probe;

import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import k3j.provider.ProviderGrade;
import k3j.provider.ProviderResponse;
import k3j.verdict.Invariants;
import k3j.verdict.Verdict;
import k3j.verdict.VerdictLimits;

/**
 * A live endpoint judged: every prompt in every form asked and graded against the reference through the provider
 * grade, then the invariance battery ({@link Property}); every case becomes an item of the one decision
 * ({@link Invariants#decide}). A planned request that fails, times out or is rate-limited past its retries leaves its
 * case NOT JUDGED (the run INCOMPLETE), naming it; an answer that cannot be read is REFUSED, naming the place.
 */
public final class Probe {

    /**
     * How to probe.
     *
     * @param url         the server's root ({@code http://host:port} or {@code .../v1})
     * @param apiKey      sent as a bearer token, or null
     * @param modelName   the {@code model} field of every request
     * @param forms       the forms asked; one the server does not serve makes the run INCOMPLETE
     * @param gen         greedy tokens asked per request
     * @param top         alternatives asked per token
     * @param batch       requests sent at once for the batch property (the subject at every position)
     * @param longGen     tokens the subject is asked for by the long-prompt property (its first half becomes the long prompt's tail)
     * @param budget      0: the properties hold on equal bits; else the nats two answers may differ by (a non-deterministic server)
     * @param timeout     one request's bound
     * @param retries     retries of a 429 or 503
     * @param maxRequests the run's bound on requests
     * @param thresholds  the provider grade's thresholds
     * @param seed        the seed of the battery's own tails
     */
    public record Settings(URI url, String apiKey, String modelName, Set<Form> forms, int gen, int top, int batch, int longGen, double budget, Duration timeout,
                           int retries, int maxRequests, ProviderGrade.Thresholds thresholds, long seed) {
        public Settings {
            if (forms.isEmpty()) throw new IllegalArgumentException("no form to ask: --forms names completions, chat or both");
            if (gen < 1 || top < 1 || top > 20 || batch < 2 || longGen < 2 || !(budget >= 0) || retries < 0 || maxRequests < 1) {
                throw new IllegalArgumentException("probe settings out of range: gen " + gen + ", top " + top + " (1..20), batch " + batch + " (>= 2), long-gen "
                        + longGen + " (>= 2), budget " + budget + ", retries " + retries + ", max requests " + maxRequests);
            }
        }

        /** The form the battery's id-based properties use: completions when asked, else chat. */
        Form primary() {
            return forms.contains(Form.COMPLETIONS) ? Form.COMPLETIONS : Form.CHAT;
        }
    }

    /** A case of the report: one per prompt and form (conformance) and one per property. */
    public enum Kind { CONFORMANCE, PROPERTY }

    /**
     * One case.
     *
     * @param kind   conformance of one prompt in one form, or a property of the battery
     * @param name   what it is
     * @param item   how it came out (the decision's item)
     * @param detail the evidence: the grade's table, or each comparison the property made
     */
    public record Case(Kind kind, String name, Invariants.Item item, String detail) {}

    /**
     * What the probe found.
     *
     * @param cases    every case, conformance first
     * @param verdict  the one decision over them
     * @param leftOut  the properties not planned, and why: a form they need was left out by {@code --forms}
     * @param requests requests sent (retries included)
     * @param retried  of them, retries after 429 or 503
     */
    public record Result(List<Case> cases, Verdict verdict, List<String> leftOut, int requests, int retried) {
        /** {@return the first case that is not green, or null} */
        public Case firstDivergence() {
            for (Case c : cases) if (c.item().status() == Invariants.Status.FAIL || c.item().status() == Invariants.Status.REFUSED) return c;
            for (Case c : cases) if (c.item().status() != Invariants.Status.PASS) return c;
            return null;
        }
    }

    private final Settings s;
    private final Reference ref;
    private final Endpoint endpoint;
    private final Asking asking;
    private final Map<String, Answer> base = new LinkedHashMap<>();
    private final Map<Form, String> notServed = new LinkedHashMap<>();

    private Probe(Settings s, Reference ref, Endpoint endpoint) {
        this.s = s;
        this.ref = ref;
        this.endpoint = endpoint;
        this.asking = new Asking(endpoint, s.modelName(), s.gen(), s.top(), ref.tokenizer(), ref.vocab());
    }

    /** Probes the server of {@code s} with {@code prompts} against {@code ref}. */
    public static Result run(Settings s, Reference ref, List<Prompt> prompts) throws InterruptedException {
        if (prompts.isEmpty()) throw new IllegalArgumentException("no prompt");
        try (Endpoint e = new Endpoint(s.url(), s.apiKey(), s.timeout(), s.retries(), s.maxRequests())) {
            Probe p = new Probe(s, ref, e);
            List<Case> cases = new ArrayList<>();
            for (Form f : Form.values()) {
                if (!s.forms().contains(f)) continue;
                for (Prompt q : prompts) cases.add(p.conformance(q, f));
            }
            List<String> leftOut = new ArrayList<>();
            for (Property prop : Property.values()) {
                if (prop.leftOut(s) != null) leftOut.add(prop.leftOut(s));
                else cases.add(p.property(prop, prompts));
            }
            List<Invariants.Item> items = cases.stream().map(Case::item).toList();
            Verdict v = Invariants.decide(Invariants.Mode.FLOAT32, items);
            return new Result(List.copyOf(cases), v, List.copyOf(leftOut), e.sent(), e.retried());
        }
    }

    private static String key(Prompt p, Form f) {
        return p.name() + " " + f.word();
    }

    /** A prompt in a form, graded against the reference through the provider grade and its invariants. */
    private Case conformance(Prompt p, Form f) throws InterruptedException {
        String what = "conformance: " + key(p, f);
        if (notServed.containsKey(f)) return new Case(Kind.CONFORMANCE, what, Invariants.Item.notJudged(what, notServed.get(f)), "");
        try {
            Answer a = asking.ask(key(p, f), f, p, s.gen(), false);
            base.put(key(p, f), a);
            float[] rows = ref.rows(a.prompt(), a.ids().chosen());
            int n = rows.length / ref.vocab();
            ProviderGrade.Ids ids = a.ids();
            if (n < ids.size()) ids = new ProviderGrade.Ids(Arrays.copyOf(ids.chosen(), n), Arrays.copyOf(ids.top(), n), Arrays.copyOf(ids.topLogprob(), n));
            ProviderGrade g = ProviderGrade.grade(rows, ids, ref.vocab(), a.prompt().length - 1);
            Invariants.Item item = g.item(what, rows, s.thresholds(), VerdictLimits.shipped());
            if (item.status() == Invariants.Status.FAIL) item = new Invariants.Item(what, item.status(), item.why() + firstApart(g));
            String head = String.format(Locale.ROOT, "the server's logprobs (%s form, %d prompt ids, %d completion tokens%s) against %s; thresholds: %s%n",
                    f.word(), a.prompt().length, a.size(), n < a.size() ? ", the first " + n + " graded: the reference's ids part from the server's there" : "",
                    ref.describe(), s.thresholds().text());
            return new Case(Kind.CONFORMANCE, what, item, head + g.text());
        } catch (Endpoint.Failed e) {
            if (e.notServed) notServed.put(f, "the server does not serve the " + f.word() + " form (" + e.getMessage() + "); leave it out with --forms to judge the rest");
            return new Case(Kind.CONFORMANCE, what, Invariants.Item.notJudged(what, e.notServed ? notServed.get(f) : e.getMessage()), "");
        } catch (ProviderResponse.RefusedException e) {
            return new Case(Kind.CONFORMANCE, what, Invariants.Item.refused(what, e.getMessage()), "");
        }
    }

    /** "; first apart at position P: ..." the first position whose top-1 differs, else the one with the largest |dlogprob|. */
    private static String firstApart(ProviderGrade g) {
        ProviderGrade.Row worst = g.rows().getFirst();
        for (ProviderGrade.Row r : g.rows()) {
            if (!r.sameTop1()) {
                return String.format(Locale.ROOT, "; first apart at position %d: the server's top token is id %d, the reference's id %d (the server's token ranks %d there)",
                        r.position(), r.providerTop(), r.candidateTop(), r.chosenRank());
            }
            if (r.maxAbsDlogprob() > worst.maxAbsDlogprob()) worst = r;
        }
        return String.format(Locale.ROOT, "; furthest apart at position %d: |dlogprob| %.3g nats", worst.position(), worst.maxAbsDlogprob());
    }

    private Case property(Property prop, List<Prompt> prompts) throws InterruptedException {
        String what = prop.title;
        List<String> lines = new ArrayList<>();
        try {
            String skip = prop.needs(s, notServed);
            if (skip != null) return new Case(Kind.PROPERTY, what, Invariants.Item.notJudged(what, skip), "");
            Divergence d = switch (prop) {
                case REPEATED -> repeated(prompts, lines);
                case BATCH -> batch(prompts, lines);
                case PREFIX_CACHE -> prefix(prompts.getFirst(), lines);
                case CHUNKED_PREFILL -> chunked(prompts.getFirst(), lines);
                case STREAMED -> streamed(prompts.getFirst(), lines);
                case COMPLETIONS_CHAT -> completionsChat(prompts, lines);
            };
            String detail = String.join("\n", lines);
            if (d == null) return new Case(Kind.PROPERTY, what, Invariants.Item.pass(what), detail);
            return new Case(Kind.PROPERTY, what, Invariants.Item.fail(what, d.text()), detail);
        } catch (Endpoint.Failed e) {
            return new Case(Kind.PROPERTY, what, Invariants.Item.notJudged(what, e.getMessage()), String.join("\n", lines));
        } catch (ProviderResponse.RefusedException e) {
            return new Case(Kind.PROPERTY, what, Invariants.Item.refused(what, e.getMessage()), String.join("\n", lines));
        }
    }

    /** The answer every property compares with: the conformance answer, or asked now when that one was not had. */
    private Answer standard(Prompt p, Form f) throws Endpoint.Failed, InterruptedException {
        Answer a = base.get(key(p, f));
        if (a == null) {
            a = asking.ask(key(p, f), f, p, s.gen(), false);
            base.put(key(p, f), a);
        }
        return a;
    }

    private Divergence compare(Answer a, Answer b, List<String> lines) {
        Divergence d = Divergence.first(a, 0, b, 0, Math.max(a.size(), b.size()), s.budget());
        lines.add((d == null ? "same " + (s.budget() == 0 ? "bits" : "within the budget") + ": \"" + b.request() + "\" and \"" + a.request() + "\" (" + b.size() + " tokens)" : "PARTS: " + d.text()));
        return d;
    }

    private Divergence repeated(List<Prompt> prompts, List<String> lines) throws Endpoint.Failed, InterruptedException {
        Divergence first = null;
        for (Form f : s.forms()) {
            if (f == Form.CHAT && prompts.stream().allMatch(p -> p.text() == null)) continue;
            for (Prompt p : prompts) {
                if (f == Form.CHAT && p.text() == null) continue;
                Answer a = standard(p, f), b = asking.ask(key(p, f) + " again", f, p, s.gen(), false);
                Divergence d = compare(a, b, lines);
                if (first == null) first = d;
            }
        }
        return first;
    }

    private Divergence batch(List<Prompt> prompts, List<String> lines) throws Endpoint.Failed, InterruptedException {
        Form f = s.primary();
        Prompt subject = prompts.getFirst();
        Answer alone = standard(subject, f);
        List<Prompt> others = prompts.size() > 1 ? prompts.subList(1, prompts.size()) : prompts;
        Divergence first = null;
        try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            for (int at = 0; at < s.batch(); at++) {
                List<Future<Answer>> sent = new ArrayList<>();
                for (int k = 0; k < s.batch(); k++) {
                    Prompt q = k == at ? subject : others.get(k % others.size());
                    String name = key(q, f) + (k == at ? " in a batch of " + s.batch() + " at position " + at : " (batch " + at + ", position " + k + ")");
                    sent.add(pool.submit(() -> asking.ask(name, f, q, s.gen(), false)));
                    Thread.sleep(3);   // the batch's order: each request leaves a little after the one before
                }
                Answer mine = null;
                for (int k = 0; k < sent.size(); k++) {
                    Answer a = get(sent.get(k));
                    if (k == at) mine = a;
                }
                Divergence d = compare(alone, mine, lines);
                if (first == null) first = d;
            }
        }
        return first;
    }

    private static Answer get(Future<Answer> f) throws Endpoint.Failed, InterruptedException {
        try {
            return f.get();
        } catch (ExecutionException e) {
            if (e.getCause() instanceof Endpoint.Failed x) throw x;
            if (e.getCause() instanceof RuntimeException x) throw x;
            throw new IllegalStateException(e.getCause());
        }
    }

    /** Ids of the battery's own, different per {@code salt}, over the base vocabulary. */
    private int[] tail(int n, int salt) {
        java.util.Random r = new java.util.Random(s.seed() * 31 + salt);
        int[] out = new int[n];
        int bound = ref.tokenizer() != null ? ref.tokenizer().nBase() : ref.vocab();
        for (int i = 0; i < n; i++) out[i] = r.nextInt(bound);
        return out;
    }

    private static int[] concat(int[] a, int[] b) {
        int[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    private Divergence prefix(Prompt p, List<String> lines) throws Endpoint.Failed, InterruptedException {
        Form f = Form.COMPLETIONS;
        Prompt mine = new Prompt(p.name() + "+A", concat(p.ids(), tail(3, 1)), null, null), other = new Prompt(p.name() + "+B", concat(p.ids(), tail(3, 2)), null, null);
        Answer cold = asking.ask(mine.name() + " first", f, mine, s.gen(), false);
        asking.ask(other.name() + " (shares its first " + p.ids().length + " ids)", f, other, s.gen(), false);
        Answer warm = asking.ask(mine.name() + " after " + other.name(), f, mine, s.gen(), false);
        return compare(cold, warm, lines);
    }

    private Divergence chunked(Prompt p, List<String> lines) throws Endpoint.Failed, InterruptedException {
        Form f = Form.COMPLETIONS;
        Answer shortAnswer = asking.ask(p.name() + " for " + s.longGen() + " tokens", f, p, s.longGen(), false);
        int n = shortAnswer.size();
        if (n < 2) throw new Endpoint.Failed(shortAnswer.request() + ": " + n + " token(s), too few to make a long prompt of (it ended early)", false);
        int m = (n + 1) / 2;
        int[] tailIds = Arrays.copyOf(shortAnswer.ids().chosen(), m);
        Prompt longer = new Prompt(p.name() + "+" + m, concat(p.ids(), tailIds), null, null);
        Answer longAnswer = asking.ask(longer.name() + " (" + longer.ids().length + " ids: the short prompt and " + m + " of its own tokens)", f, longer, n - m, false);
        lines.add("the long prompt is the short one (" + p.ids().length + " ids) and the first " + m + " tokens it was answered with (" + longer.ids().length + " ids)");
        Divergence d = Divergence.first(shortAnswer, m, longAnswer, 0, n - m, s.budget());
        lines.add(d == null ? "same " + (s.budget() == 0 ? "bits" : "within the budget") + " over the " + (n - m) + " tokens both answer" : "PARTS: " + d.text());
        return d;
    }

    private Divergence streamed(Prompt p, List<String> lines) throws Endpoint.Failed, InterruptedException {
        Divergence first = null;
        for (Form f : s.forms()) {
            if (f == Form.CHAT && p.text() == null) continue;
            Answer a = standard(p, f), b = asking.ask(key(p, f) + " streamed", f, p, s.gen(), true);
            Divergence d = compare(a, b, lines);
            if (first == null) first = d;
        }
        return first;
    }

    private Divergence completionsChat(List<Prompt> prompts, List<String> lines) throws Endpoint.Failed, InterruptedException {
        Divergence first = null;
        for (Prompt p : prompts) {
            if (p.text() == null) continue;
            Answer chat = standard(p, Form.CHAT);
            Prompt asIds = new Prompt(p.name() + "'s chat ids", p.chatIds(), null, null);
            Answer comp = asking.ask(p.name() + "'s chat prompt as completions ids", Form.COMPLETIONS, asIds, s.gen(), false);
            Divergence d = compare(chat, comp, lines);
            if (first == null) first = d;
        }
        return first;
    }
}
