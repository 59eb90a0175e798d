package k3j.serve;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import k3j.api.ServedText;
import k3j.api.Serving;

/**
 * One submitted sequence seen from its HTTP request: the batch's thread puts what the sequence produces on a queue
 * (never blocking), the request's thread takes it, turns ids into text, ends the text at a stop string and cancels
 * the sequence there, at the chat's end of message, or when its client is gone: the connection seen closed at each
 * of its ids, on the batch's thread (so the slot is free before the next step), while it waits in the queue, or a
 * write that fails.
 */
final class Call implements Serving.Sink {
    /** What the sequence produced. */
    sealed interface Event {
        record Prompt(List<Serving.TokenLogprob> entries) implements Event {}

        record Token(Serving.TokenLogprob token) implements Event {}

        record End(Serving.Finish why, String detail) implements Event {}
    }

    private final LinkedBlockingQueue<Event> events = new LinkedBlockingQueue<>();
    private final Job job;
    private final ServedText text;
    private final java.util.function.BooleanSupplier clientGone;
    private volatile Serving.Ticket ticket;
    private volatile boolean cancelWanted;

    /** The ids kept (an end marker left out), their logprobs, and the prompt's. */
    final List<Serving.TokenLogprob> tokens = new ArrayList<>();
    List<Serving.TokenLogprob> promptEntries = List.of();
    /** "stop", "length", or null while it runs. */
    String finish;
    /** The visible text so far (a completion's text, a chat's content), cut at a stop string. */
    String visible = "";
    /** A chat's thinking channel so far. */
    String reasoning = "";
    private int[] ids = new int[0];
    private boolean endMarker;

    /** How long {@link #advance} waits for an event before it looks at the client again. */
    private static final long LOOK_NANOS = TimeUnit.MILLISECONDS.toNanos(200);

    Call(Job job, ServedText text, java.util.function.BooleanSupplier clientGone) {
        this.job = job;
        this.text = text;
        this.clientGone = clientGone;
    }

    @Override
    public void prompt(List<Serving.TokenLogprob> entries) {
        events.add(new Event.Prompt(List.copyOf(entries)));
    }

    @Override
    public void token(int step, Serving.TokenLogprob token) {
        events.add(new Event.Token(token));
        if (job.chat() && text.endsTurn(token.id()) || clientGone.getAsBoolean()) cancel();
    }

    @Override
    public void finished(Serving.Finish why, String detail) {
        events.add(new Event.End(why, detail));
    }

    void submitted(Serving.Ticket t) {
        ticket = t;
        if (cancelWanted) t.cancel();
    }

    /** Ends the sequence before its next step (idempotent; before submit returns, as soon as it does). */
    void cancel() {
        cancelWanted = true;
        Serving.Ticket t = ticket;
        if (t != null) t.cancel();
    }

    /**
     * Waits for the next event and takes it in: true while the sequence goes on.
     *
     * @param deadlineNanos System.nanoTime() past which the request has timed out
     * @throws ApiError 504 at the deadline, 500 when the sequence failed
     */
    boolean advance(long deadlineNanos) throws InterruptedException {
        long wait = deadlineNanos - System.nanoTime();
        Event e = wait <= 0 ? events.poll() : events.poll(Math.min(wait, LOOK_NANOS), TimeUnit.NANOSECONDS);
        if (e == null && wait > LOOK_NANOS) {
            if (clientGone.getAsBoolean()) cancel();
            return true;
        }
        if (e == null) {
            cancel();
            throw new ApiError(504, "timeout", null, "timeout", "the request took longer than the server's request timeout", 0);
        }
        switch (e) {
            case Event.Prompt p -> promptEntries = p.entries();
            case Event.Token t -> take(t.token());
            case Event.End end -> {
                if (finish == null) {
                    switch (end.why()) {
                        case LENGTH -> finish = "length";
                        case END_OF_SEQUENCE -> finish = "stop";
                        case CANCELLED -> finish = "stop";
                        case ERROR -> throw new ApiError(500, "server_error", null, null, "the sequence failed: " + end.detail(), 0);
                    }
                }
                return false;
            }
        }
        return true;
    }

    private void take(Serving.TokenLogprob t) {
        if (finish != null) return;   // after a stop string: the ids still in flight are dropped
        boolean end = job.chat() ? text.endsTurn(t.id()) : job.stopAtEos() && t.id() == text.eos();
        if (end) {
            finish = "stop";
            endMarker = true;
            return;
        }
        tokens.add(t);
        ids = java.util.Arrays.copyOf(ids, ids.length + 1);
        ids[ids.length - 1] = t.id();
        if (!text.hasTokenizer()) return;
        String shown;
        if (job.chat()) {
            ServedText.Split s = text.split(ids, job.thinking());
            reasoning = s.reasoning();
            shown = s.content();
            if (s.ended()) finish = "stop";
        } else {
            shown = text.text(ids);
        }
        int cut = -1;
        for (String s : job.stop()) {
            int at = shown.indexOf(s);
            if (at >= 0 && (cut < 0 || at < cut)) cut = at;
        }
        if (cut >= 0) {
            shown = shown.substring(0, cut);
            finish = "stop";
        }
        visible = shown;
        if (finish != null) cancel();
    }

    /** {@return whether it ended on the end-of-sequence id or the chat's end of message (generated, not returned)} */
    boolean endedOnMarker() {
        return endMarker;
    }

    /** How much of {@link #visible} may be sent now: all once it ended, else short of a stop string's possible start and an unfinished character. */
    int sendable() {
        if (finish != null) return visible.length();
        int n = visible.length();
        while (n > 0 && visible.charAt(n - 1) == '\uFFFD') n--;
        int hold = 0;
        for (String s : job.stop()) {
            for (int k = Math.min(s.length() - 1, n); k > hold; k--) {
                if (visible.regionMatches(n - k, s, 0, k)) {
                    hold = k;
                    break;
                }
            }
        }
        return n - hold;
    }
}
