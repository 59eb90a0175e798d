package k3j.chat;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadFeature;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * The transcript a chat appends each turn to and saves to its history file ({@code k3j.api.History} is the API's
 * immutable view of the same messages). A conversation: an optional system message first, then user and assistant strictly alternating, reasoning
 * only on assistant messages. Stored as JSONL (docs/formats.md §13): one object per LF-terminated line with
 * exactly {@code role}, {@code content} and, for an assistant, optionally {@code reasoning_content} and
 * {@code "interrupted": true} (a reply cut by a stop, kept as cut). Reading
 * refuses anything else with {@code path:line: reason}; saving is atomic (temp file, fsync, rename).
 */
public final class Transcript {
    public static final int MAX_LINE = 16 << 20;
    /** The key that marks an assistant reply cut by a stop before it ended. */
    public static final String INTERRUPTED = "interrupted";
    /** A history file larger than this could never be fed (a chat holds at most 36,864 positions): refused unread. */
    public static final long MAX_FILE = 64L << 20;
    private static final JsonFactory JSON = JsonFactory.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build();

    private final List<Message> messages = new ArrayList<>();

    public Transcript() {}

    public Transcript(List<Message> messages) {
        for (Message m : messages) add(m);
    }

    public List<Message> messages() {
        return List.copyOf(messages);
    }

    public int size() {
        return messages.size();
    }

    /** Appends, refusing a message out of turn. */
    public void add(Message m) {
        String why = outOfTurn(messages.size(), m, messages.isEmpty() ? null : messages.getLast().role());
        if (why != null) throw new ChatException(why);
        messages.add(m);
    }

    /** Who may speak next: USER after a system message, an assistant message or nothing; ASSISTANT after a user. */
    public Role next() {
        return !messages.isEmpty() && messages.getLast().role() == Role.USER ? Role.ASSISTANT : Role.USER;
    }

    /** Back to the initial system message alone (the interactive /reset). */
    public void reset() {
        boolean system = !messages.isEmpty() && messages.getFirst().role() == Role.SYSTEM;
        Message first = system ? messages.getFirst() : null;
        messages.clear();
        if (first != null) messages.add(first);
    }

    private static String outOfTurn(int index, Message m, Role previous) {
        if (m.role() == Role.SYSTEM) return index == 0 ? null : "a system message is allowed only first, not at message " + (index + 1);
        Role want = previous == Role.USER ? Role.ASSISTANT : Role.USER;
        return m.role() == want ? null : "message " + (index + 1) + " is " + m.role().id() + ", expected " + want.id()
                + " (after an optional system message, user and assistant alternate, starting with user)";
    }

    /** A missing file is an empty history. */
    public static Transcript read(Path path) {
        if (!Files.exists(path, java.nio.file.LinkOption.NOFOLLOW_LINKS)) return new Transcript();
        byte[] all;
        try {
            all = k3j.io.SafeFiles.readAll(path, MAX_FILE, "a chat history (--history)");
        } catch (IOException e) {
            throw new ChatException(k3j.io.SafeFiles.why(e), e);
        }
        Transcript h = new Transcript();
        int line = 0;
        for (int at = 0; at < all.length; ) {
            line++;
            int eol = at;
            while (eol < all.length && all[eol] != '\n') eol++;
            if (eol == all.length) throw bad(path, line, "the last line has no LF");
            if (eol - at > MAX_LINE) throw bad(path, line, "longer than " + MAX_LINE + " bytes");
            if (eol == at) throw bad(path, line, "blank line");
            Message m = parse(path, line, all, at, eol);
            String why = outOfTurn(h.messages.size(), m, h.messages.isEmpty() ? null : h.messages.getLast().role());
            if (why != null) throw bad(path, line, why);
            h.messages.add(m);
            at = eol + 1;
        }
        return h;
    }

    private static Message parse(Path path, int line, byte[] b, int from, int to) {
        String role = null, content = null, reasoning = null;
        boolean interrupted = false;
        try (JsonParser p = JSON.createParser(b, from, to - from)) {
            if (p.nextToken() != JsonToken.START_OBJECT) throw bad(path, line, "not a JSON object");
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String key = p.currentName();
                if (key.equals(INTERRUPTED)) {
                    // present only as true: a reply that was cut; an ended reply has no key at all
                    if (p.nextToken() != JsonToken.VALUE_TRUE) throw bad(path, line, "'" + INTERRUPTED + "' must be true when present (a reply cut by a stop)");
                    interrupted = true;
                    continue;
                }
                if (p.nextToken() != JsonToken.VALUE_STRING) throw bad(path, line, "'" + key + "' must be a string");
                String v = p.getText();
                String why = badText(v);
                if (why != null) throw bad(path, line, "'" + key + "' " + why);
                switch (key) {
                    case "role" -> role = v;
                    case "content" -> content = v;
                    case "reasoning_content" -> reasoning = v;
                    default -> throw bad(path, line, "unknown key '" + key + "' (allowed: role, content, reasoning_content, interrupted)");
                }
            }
            if (p.nextToken() != null) throw bad(path, line, "data after the JSON object");
        } catch (JsonProcessingException e) {
            throw bad(path, line, "not valid JSON: " + e.getOriginalMessage().replace('\n', ' '));
        } catch (IOException e) {
            throw bad(path, line, e.getMessage());
        }
        if (role == null) throw bad(path, line, "no role");
        if (content == null) throw bad(path, line, "no content");
        Role r = Role.of(role);
        if (r == null) throw bad(path, line, "role '" + role + "' is not system, user or assistant");
        if (reasoning != null && r != Role.ASSISTANT) throw bad(path, line, "reasoning_content is allowed only on an assistant message");
        if (interrupted && r != Role.ASSISTANT) throw bad(path, line, "interrupted is allowed only on an assistant message");
        return new Message(r, content, reasoning, interrupted);
    }

    /** NUL and unpaired surrogates (both only reachable through \\u escapes) are refused: why, or null when the text is fine. */
    public static String badText(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == 0) return "contains NUL";
            if (Character.isHighSurrogate(c) && (i + 1 == s.length() || !Character.isLowSurrogate(s.charAt(i + 1)))) return "contains an unpaired surrogate";
            if (Character.isLowSurrogate(c) && (i == 0 || !Character.isHighSurrogate(s.charAt(i - 1)))) return "contains an unpaired surrogate";
        }
        return null;
    }

    private static ChatException bad(Path path, int line, String reason) {
        return new ChatException(path + ":" + line + ": " + reason);
    }

    /** The JSONL bytes: keys in the order role, content, reasoning_content, interrupted. */
    public byte[] toJsonl() {
        StringBuilder sb = new StringBuilder();
        for (Message m : messages) {
            sb.append("{\"role\":");
            quote(sb, m.role().id());
            sb.append(",\"content\":");
            quote(sb, m.content());
            if (m.reasoning() != null) {
                sb.append(",\"reasoning_content\":");
                quote(sb, m.reasoning());
            }
            if (m.interrupted()) sb.append(",\"" + INTERRUPTED + "\":true");
            sb.append("}\n");
        }
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    private static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
                    else sb.append(c);
                }
            }
        }
        sb.append('"');
    }

    /** sha256 of the JSONL bytes: what a saved state records to tie itself to this conversation. */
    public byte[] sha256() {
        try {
            return MessageDigest.getInstance("SHA-256").digest(toJsonl());
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    public String sha256Hex() {
        return HexFormat.of().formatHex(sha256());
    }

    /** Writes {@code path} atomically: a temp file beside it, fsync, rename over it. */
    public void save(Path path) {
        try {
            k3j.io.AtomicWrite.replace(path, ch -> {
                ByteBuffer buf = ByteBuffer.wrap(toJsonl());
                while (buf.hasRemaining()) ch.write(buf);
            });
        } catch (IOException e) {
            throw new ChatException(path + ": cannot save the history (--history): " + k3j.io.SafeFiles.why(e), e);
        }
    }
}
