package k3j.api;

import java.util.ArrayList;
import java.util.List;
import k3j.model.DecodeState;
import k3j.sample.Sampler;

/** One admitted or waiting sequence: its request, its sink, its own state and sampler, and how far it has come. */
final class Sequence implements Serving.Ticket {
    final Serving.Request request;
    final Serving.Sink sink;
    final Sampler sampler;
    private final Runnable wake;
    private final Hooks.RowTap rows;
    volatile boolean cancelled;
    DecodeState state;
    /** prompt ids fed so far */
    int fed;
    /** ids generated so far */
    int generated;
    int last;
    boolean done;
    final List<Serving.TokenLogprob> promptEntries = new ArrayList<>();

    Sequence(Serving.Request request, Serving.Sink sink, Sampler sampler, Runnable wake, Hooks.RowTap rows) {
        this.rows = rows;
        this.request = request;
        this.sink = sink;
        this.sampler = sampler;
        this.wake = wake;
    }

    @Override
    public void cancel() {
        cancelled = true;
        wake.run();
    }

    boolean prefilling() {
        return fed < request.prompt().length;
    }

    /** The ids of its next feed: the next prefill chunk, or the last generated id. */
    int[] nextFeed(int chunk) {
        int[] p = request.prompt();
        if (!prefilling()) return new int[] {last};
        return java.util.Arrays.copyOfRange(p, fed, Math.min(p.length, fed + chunk));
    }

    /** {@return {@code id} with its logprob and the request's number of alternatives, from the logits row at {@code off}} */
    Serving.TokenLogprob logprob(float[] logits, int off, int vocab, int id) {
        rows.row(this, logits, off, vocab);
        return Serving.TokenLogprob.of(logits, off, vocab, id, request.topLogprobs());
    }
}
