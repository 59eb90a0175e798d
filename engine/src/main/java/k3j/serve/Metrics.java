package k3j.serve;

import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import k3j.api.Serving;

/** GET /metrics: the batch's figures and the server's answers in the Prometheus text format (version 0.0.4). */
final class Metrics {
    private final Map<Integer, AtomicLong> answers = new ConcurrentHashMap<>();

    void answered(int status) {
        answers.computeIfAbsent(status, s -> new AtomicLong()).incrementAndGet();
    }

    String text(Serving.Stats s, int inFlight) {
        StringBuilder b = new StringBuilder();
        gauge(b, "k3_queue_depth", "Sequences waiting for a slot.", s.queued());
        gauge(b, "k3_active_sequences", "Sequences in the batch.", s.active());
        gauge(b, "k3_tokens_per_second", "Ids generated per second over the last steps.", s.tokensPerSecond());
        gauge(b, "k3_step_seconds", "The last step's time.", s.lastStepSeconds());
        gauge(b, "k3_step_bytes_read", "Bytes of weights the last step read.", s.lastStepBytes());
        gauge(b, "k3_http_requests_in_flight", "Generation requests being answered.", inFlight);
        counter(b, "k3_steps_total", "Steps run.", s.steps());
        counter(b, "k3_generated_tokens_total", "Ids generated.", s.tokens());
        b.append("# HELP k3_http_responses_total Answers by HTTP status.\n# TYPE k3_http_responses_total counter\n");
        new TreeMap<>(answers).forEach((code, n) -> b.append("k3_http_responses_total{code=\"").append(code).append("\"} ").append(n.get()).append('\n'));
        return b.toString();
    }

    private static void gauge(StringBuilder b, String name, String help, double v) {
        b.append("# HELP ").append(name).append(' ').append(help).append("\n# TYPE ").append(name).append(" gauge\n")
                .append(name).append(' ').append(number(v)).append('\n');
    }

    private static void counter(StringBuilder b, String name, String help, long v) {
        b.append("# HELP ").append(name).append(' ').append(help).append("\n# TYPE ").append(name).append(" counter\n")
                .append(name).append(' ').append(v).append('\n');
    }

    private static String number(double v) {
        if (Double.isNaN(v)) return "NaN";
        if (Double.isInfinite(v)) return v > 0 ? "+Inf" : "-Inf";
        return v == Math.rint(v) && Math.abs(v) < 1e15 ? Long.toString((long) v) : String.format(Locale.ROOT, "%.6g", v);
    }
}
