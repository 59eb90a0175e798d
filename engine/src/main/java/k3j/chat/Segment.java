package k3j.chat;

/**
 * A piece of a rendered conversation. CONTROL pieces are encoded with added-token recognition, TEXT pieces
 * without it, so text a user typed can never become a control token (the injection defence).
 */
public sealed interface Segment {
    String text();

    record Control(String text) implements Segment {}

    record Text(String text) implements Segment {}
}
