package k3j.api;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.function.BooleanSupplier;
import java.util.function.IntConsumer;
import k3j.chat.Conversation;
import k3j.chat.Thinking;
import k3j.chat.Xtml;
import k3j.model.DecodeState;
import k3j.state.StateException;
import k3j.state.StateFile;

/**
 * A conversation with an engine's model (docs/semantics.md §8.4): each {@link #reply} feeds only what follows the
 * last reply to the carried state; {@link #saveHistory} and {@link #saveState} write it, {@link #resume} continues
 * a saved one, {@link #reset} starts over keeping only the system message.
 */
public final class Chat {
    private final Engine engine;
    private final Xtml xtml;
    private final Conversation conversation;

    Chat(Engine engine, History history, Thinking thinking, Sampling sampling) {
        this.engine = engine;
        try {
            this.xtml = new Xtml(engine.tokenizer());
            this.conversation = new Conversation(engine.forward(), xtml, thinking, sampling.sampler(), history.chat())
                    .limitPositions(engine.maxPositions(), engine.maxPositionsSource());
        } catch (k3j.chat.ChatException e) {
            throw new ChatRefused(e);
        }
    }

    /** {@return the conversation so far (a copy: later turns do not change it)} */
    public History history() {
        return History.of(conversation.history());
    }

    Xtml xtml() {
        return xtml;
    }

    /** {@return the positions the carried state holds: 0 before the first reply} */
    public int positions() {
        DecodeState st = conversation.state();
        return st == null ? 0 : st.cached();
    }

    /**
     * The text of {@code ids} as a reply shows it while it streams: the chat's markers left out, bytes that are not
     * yet whole UTF-8 shown as U+FFFD.
     *
     * @param ids ids of a reply, whole or as far as it has streamed
     * @return their text
     */
    public String text(int[] ids) {
        return engine.decode(java.util.Arrays.stream(ids).filter(id -> !isMarker(id)).toArray());
    }

    private boolean isMarker(int id) {
        Xtml.Ids m = xtml.ids();
        return id == m.open() || id == m.close() || id == m.sep() || id == m.eom() || id == m.eos();
    }

    /**
     * One user turn: up to {@code maxTokens} ids, each told to {@code shown} as it is chosen; the reply ends at the
     * end of message or [EOS], at the limit, or when {@code cancelled} turns true.
     *
     * @param user the user message
     * @param maxTokens the most ids the reply may have
     * @param shown told each id of the reply as it is chosen
     * @param cancelled asked after each id; true ends the reply there
     * @return the reply, also appended to the history with the user message
     */
    public Reply reply(String user, int maxTokens, IntConsumer shown, BooleanSupplier cancelled) {
        try {
            return Reply.of(turn(user, maxTokens, shown, cancelled));
        } catch (k3j.chat.ChatException e) {
            throw new ChatRefused(e);
        }
    }

    Conversation.Reply turn(String user, int maxTokens, IntConsumer shown, BooleanSupplier cancelled) {
        return conversation.turn(user, maxTokens, shown, cancelled);
    }

    /** Forgets the carried state and keeps only the initial system message. */
    public void reset() {
        conversation.reset();
    }

    /**
     * Writes the conversation so far to {@code file} as a JSONL history (docs/formats.md), whole or not at all.
     *
     * @param file the history file to write
     */
    public void saveHistory(Path file) {
        conversation.history().save(file);
    }

    /**
     * Writes the carried state, tied to these weights and to this conversation's history.
     *
     * @param file the state file to write
     */
    public void saveState(Path file) {
        try {
            StateFile.save(file, engine.binding(), conversation.history().sha256(), conversation.ids(), conversation.state());
        } catch (StateException e) {
            throw new StateRefused(e);
        }
    }

    /**
     * Continues from the state saved in {@code file}, which must follow exactly this conversation's history
     * ({@code historyName} names it in the refusal); {@code room}: positions to hold beyond it before growing.
     * Returns the positions resumed.
     *
     * @param file the state file
     * @param historyName how the refusal names this conversation's history
     * @param room positions to hold beyond the saved ones before the state grows
     * @return the positions resumed
     */
    public int resume(Path file, String historyName, int room) {
        DecodeState st;
        StateFile.Loaded l;
        try {
            st = engine.forward().newState(StateFile.idCount(file, engine.maxPositions() - room, "a chat may still hold beside " + room
                    + " more (the " + engine.maxPositions() + " " + engine.maxPositionsSource() + ")") + room);
            l = StateFile.load(file, engine.binding(), st);
        } catch (StateException e) {
            throw new StateRefused(e);
        }
        k3j.chat.Transcript h = conversation.history();
        if (!Arrays.equals(l.conversation(), h.sha256())) {
            throw new StateRefused(file + ": refusing the state: it follows another conversation than " + historyName + " (history sha256 "
                    + HexFormat.of().formatHex(l.conversation()).substring(0, 16) + "…, this history's " + h.sha256Hex().substring(0, 16) + "…)");
        }
        try {
            conversation.resume(st, l.ids());
        } catch (k3j.chat.ChatException e) {
            throw new ChatRefused(e);
        }
        return st.cached();
    }
}
