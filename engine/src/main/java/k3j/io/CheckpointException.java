package k3j.io;

import java.nio.file.Path;

/**
 * A checkpoint that cannot be read as it claims to be: names the file, the tensor (when one is at
 * fault) and the rule it breaks. The message reads {@code FILE: tensor "NAME": DETAIL [rule]}.
 */
public final class CheckpointException extends RuntimeException {

    /** The rules an untrusted checkpoint is held to; {@link #id()} is the stable name fixtures and gates use. */
    public enum Rule {
        IO("io"),
        TOO_SHORT("too-short"),
        HEADER_LENGTH("header-length"),
        HEADER_NOT_JSON("header-not-json"),
        HEADER_NOT_OBJECT("header-not-object"),
        BAD_METADATA("bad-metadata"),
        BAD_ENTRY("bad-entry"),
        UNKNOWN_DTYPE("unknown-dtype"),
        BAD_SHAPE("bad-shape"),
        SHAPE_OVERFLOW("shape-overflow"),
        BAD_OFFSETS("bad-offsets"),
        SIZE_MISMATCH("size-mismatch"),
        OUT_OF_DATA("out-of-data"),
        OVERLAP("overlap"),
        DUPLICATE_NAME("duplicate-name"),
        NO_SHARDS("no-shards"),
        BAD_INDEX("bad-index"),
        PARTIAL_DOWNLOAD("partial-download"),
        NO_SUCH_TENSOR("no-such-tensor"),
        SHORT_READ("short-read"),
        NOT_WIDENABLE("not-widenable"),
        /** a FIFO, device, socket or directory where a file is expected: refused by type before it is opened */
        NOT_REGULAR("not-regular"),
        /** a name or metadata string that is not well-formed UTF-8 / Unicode */
        BAD_NAME("bad-name"),
        /** a file shorter at read time than when it was indexed */
        TRUNCATED("truncated");

        private final String id;

        Rule(String id) {
            this.id = id;
        }

        public String id() {
            return id;
        }
    }

    private final Rule rule;
    private final Path file;
    private final String tensor;

    public CheckpointException(Rule rule, Path file, String tensor, String detail) {
        this(rule, file, tensor, detail, null);
    }

    public CheckpointException(Rule rule, Path file, String tensor, String detail, Throwable cause) {
        super(file + ": " + (tensor == null ? "" : "tensor " + quote(tensor) + ": ") + detail + " [" + rule.id() + "]", cause);
        this.rule = rule;
        this.file = file;
        this.tensor = tensor;
    }

    public Rule rule() {
        return rule;
    }

    public Path file() {
        return file;
    }

    /** The tensor at fault, or null when the fault is the file's. */
    public String tensor() {
        return tensor;
    }

    /**
     * A name in double quotes with quotes, backslashes and control characters escaped as in JSON: names come
     * from untrusted headers and must not inject terminal control sequences into a message. Unicode is kept.
     */
    public static String quote(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\t' -> b.append("\\t");
                case '\r' -> b.append("\\r");
                default -> {
                    if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0)) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
                }
            }
        }
        return b.append('"').toString();
    }
}
