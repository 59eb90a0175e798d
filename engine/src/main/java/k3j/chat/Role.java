package k3j.chat;

/** Who speaks a message; the name is the {@code role} value in history files and in the rendered XTML. */
public enum Role {
    SYSTEM("system"), USER("user"), ASSISTANT("assistant");

    private final String id;

    Role(String id) {
        this.id = id;
    }

    public String id() {
        return id;
    }

    /** The role named {@code s}, or null. */
    public static Role of(String s) {
        for (Role r : values()) if (r.id.equals(s)) return r;
        return null;
    }
}
