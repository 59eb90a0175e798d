package k3j.chat;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.function.BooleanSupplier;
import java.util.function.IntConsumer;
import k3j.kernels.Layers;
import k3j.model.DecodeState;
import k3j.model.Forward;
import k3j.sample.Sampler;

/**
 * A chat with one model (docs/semantics.md §8.4): the history, and the ids the model has seen so far with the
 * incremental state that absorbed them. The first turn renders the whole history; every later turn — in this
 * process or after a saved state was loaded — feeds only what follows the last reply (the next user message and
 * the generation prompt) to the carried state. A reply ends at the end of message or [EOS], at the token limit,
 * or when the caller cancels it; the conversation survives all three.
 */
public final class Conversation {
    /** One turn's outcome; {@code problem} says why the reply was kept as raw text (null when it parsed). */
    public record Reply(int[] fed, int[] generated, boolean ended, Message message, String problem, double prefillSeconds, double decodeSeconds) {}

    private final Forward forward;
    private final Xtml xtml;
    private final Thinking thinking;
    private final Sampler.Settings sampling;
    private final Transcript history;
    private DecodeState state;
    private int[] ids = new int[0];   // every id of the conversation so far; state has absorbed the first state.cached()
    private boolean lastEnded = true;
    private int maxPositions = Integer.MAX_VALUE;
    private String limitSource = "";

    /**
     * The positions a conversation may hold, as a prompt is limited (the run's position limit and the config's
     * max_position_embeddings): a turn that would pass it is refused before anything is fed, and the
     * conversation stays as it was.
     */
    public Conversation limitPositions(int max, String source) {
        this.maxPositions = max;
        this.limitSource = source;
        return this;
    }

    public Conversation(Forward forward, Xtml xtml, Thinking thinking, Sampler.Settings sampling, Transcript history) {
        this.forward = forward;
        this.xtml = xtml;
        this.thinking = thinking;
        this.sampling = sampling;
        this.history = history;
    }

    /** A turn refused by the position limit: bad input, the conversation unchanged. */
    public static final class TooLong extends ChatException {
        TooLong(String message) {
            super(message);
        }
    }

    public Transcript history() {
        return history;
    }

    /** The carried state, or null before the first turn. */
    public DecodeState state() {
        return state;
    }

    /** Every id so far (the state has absorbed {@code state().cached()} of them; the rest are fed next turn). */
    public int[] ids() {
        return ids.clone();
    }

    /** Continue from a loaded state that absorbed the first {@code state.cached()} of {@code ids} (the ids after the last reply). */
    public void resume(DecodeState state, int[] ids) {
        if (history.next() != Role.USER || history.size() == 0) throw new ChatException("a saved state continues a conversation that has a reply; this history has none");
        this.state = state;
        this.ids = ids.clone();
        int last = ids[ids.length - 1];
        this.lastEnded = last == xtml.ids().eom() || last == xtml.ids().eos();
    }

    /** Forget the carried state and keep only the initial system message. */
    public void reset() {
        history.reset();
        state = null;
        ids = new int[0];
        lastEnded = true;
    }

    /**
     * One user turn: generates up to {@code maxNew} ids, telling {@code shown} each one as it is chosen, and
     * appends the user message and the reply to the history.
     */
    public Reply turn(String user, int maxNew, IntConsumer shown, BooleanSupplier cancelled) {
        Message u = Message.user(user);
        if (history.next() != Role.USER) throw new ChatException("the history ends with a user message that has no reply");
        int[] feed;
        if (state == null) {
            feed = xtml.encode(xtml.render(concat(history, u), thinking, true));
        } else {
            int[] next = xtml.encode(xtml.nextTurn(u, thinking));
            feed = Xtml.concat(Arrays.copyOfRange(ids, state.cached(), ids.length), lastEnded ? new int[0] : new int[] {xtml.ids().eom()}, next);
        }
        int cached = state == null ? 0 : state.cached();
        if ((long) cached + feed.length + maxNew > maxPositions) {
            throw new TooLong("this message needs " + ((long) cached + feed.length + maxNew) + " positions (" + cached + " held + " + feed.length + " fed + "
                    + maxNew + " to generate), more than the " + maxPositions + " " + limitSource + ": not fed; shorten it, lower --gen or start a new conversation");
        }
        state = roomFor(state, cached + feed.length + maxNew + 1);
        long t0 = System.nanoTime();
        int v = forward.weights().lmHead().rows();
        float[] logits = forward.step(feed, state, false, null).logits();
        long t1 = System.nanoTime();
        ids = Xtml.concat(Arrays.copyOf(ids, cached), feed);
        Sampler sampler = new Sampler(sampling, assistantTurns());
        int[] gen = new int[maxNew];
        int n = 0;
        boolean ended = false;
        while (n < maxNew) {
            int id = sampler.next(logits, 0, v);
            gen[n++] = id;
            shown.accept(id);
            if (id == xtml.ids().eom() || id == xtml.ids().eos()) {
                ended = true;
                break;
            }
            if (n == maxNew || cancelled.getAsBoolean()) break;
            logits = forward.step(new int[] {id}, state, false, null).logits();
        }
        long t2 = System.nanoTime();
        int[] generated = Arrays.copyOf(gen, n);
        ids = Xtml.concat(ids, generated);   // the last id is not absorbed yet: the next turn feeds it first
        lastEnded = ended;
        Message reply;
        String problem = null;
        boolean stopped = !ended && n < maxNew;   // cut by the stop request, not by the token limit
        try {
            if (!ended) throw new ChatException(stopped ? "stopped" : "the reply reached the limit of " + maxNew + " tokens");
            reply = AssistantTurn.parse(xtml, generated, thinking).message();
        } catch (ChatException e) {
            problem = e.getMessage();
            reply = new Message(Role.ASSISTANT, plainText(generated), null, stopped);
        }
        history.add(u);
        history.add(reply);
        return new Reply(feed, generated, ended, reply, problem, (t1 - t0) / 1e9, (t2 - t1) / 1e9);
    }

    private static java.util.List<Message> concat(Transcript h, Message m) {
        var all = new java.util.ArrayList<>(h.messages());
        all.add(m);
        return all;
    }

    private int assistantTurns() {
        return (int) history.messages().stream().filter(m -> m.role() == Role.ASSISTANT).count();
    }

    /** The reply's text without any added token, for a reply that did not parse. */
    private String plainText(int[] generated) {
        int[] text = Arrays.stream(generated).filter(id -> xtml.tokenizer().added(id) == null).toArray();
        return new String(xtml.tokenizer().decode(text), StandardCharsets.UTF_8);
    }

    /** {@code st} if it has room for {@code positions}, else a larger copy (capacity doubles). */
    private DecodeState roomFor(DecodeState st, int positions) {
        if (st != null && positions <= st.capacity()) return st;
        int cap = st == null ? positions : Math.max(positions, 2 * st.capacity());
        DecodeState bigger = forward.newState(cap);
        if (st != null) copy(st, bigger);
        return bigger;
    }

    static void copy(DecodeState from, DecodeState to) {
        for (int l = 0; l < from.layers(); l++) {
            Layers.KdaState a = from.kda(l);
            if (a != null) {
                Layers.KdaState b = to.kda(l);
                System.arraycopy(a.recurrent(), 0, b.recurrent(), 0, a.recurrent().length);
                System.arraycopy(a.qConv(), 0, b.qConv(), 0, a.qConv().length);
                System.arraycopy(a.kConv(), 0, b.kConv(), 0, a.kConv().length);
                System.arraycopy(a.vConv(), 0, b.vConv(), 0, a.vConv().length);
            } else {
                var src = from.mla(l);
                var dst = to.mla(l);
                float[] kv = new float[src.kvWidth()], rope = new float[src.ropeWidth()];
                for (int s = 0; s < from.cached(); s++) {
                    src.get(s, kv, 0, rope, 0);
                    dst.put(s, kv, 0, rope, 0);
                }
            }
        }
        to.restored(from.cached());
    }
}
