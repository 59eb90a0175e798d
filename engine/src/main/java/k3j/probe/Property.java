package k3j.probe;

import java.util.Map;

/** The invariance battery: each property a server must hold, by name. */
public enum Property {
    REPEATED("the same request repeated"),
    BATCH("alone against inside concurrent requests, at every position of the batch"),
    PREFIX_CACHE("after a request sharing its prefix (prefix cache)"),
    CHUNKED_PREFILL("a long prompt (chunked prefill) against its short prefix"),
    STREAMED("streamed against not"),
    COMPLETIONS_CHAT("completions against chat for the same tokens");

    /** The property's name in every report. */
    public final String title;

    Property(String title) {
        this.title = title;
    }

    /** Why it cannot be judged with these settings (null: it can): left out by --forms, or a form the server does not serve. */
    String needs(Probe.Settings s, Map<Form, String> notServed) {
        boolean ids = this == PREFIX_CACHE || this == CHUNKED_PREFILL || this == COMPLETIONS_CHAT;
        if (ids && notServed.containsKey(Form.COMPLETIONS)) return notServed.get(Form.COMPLETIONS);
        if (this == COMPLETIONS_CHAT && notServed.containsKey(Form.CHAT)) return notServed.get(Form.CHAT);
        if (!ids && notServed.containsKey(s.primary())) return notServed.get(s.primary());
        return null;
    }

    /** Why it is left out of a run with these settings (null: it is planned): a form it needs was left out by --forms. */
    String leftOut(Probe.Settings s) {
        boolean ids = this == PREFIX_CACHE || this == CHUNKED_PREFILL || this == COMPLETIONS_CHAT;
        if (ids && !s.forms().contains(Form.COMPLETIONS)) return title + ": needs the completions form (prompts as ids)";
        if (this == COMPLETIONS_CHAT && !s.forms().contains(Form.CHAT)) return title + ": needs the chat form";
        return null;
    }
}
