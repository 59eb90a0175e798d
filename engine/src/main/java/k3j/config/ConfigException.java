package k3j.config;

import java.util.List;

/**
 * A config the reader refuses. It names every problem it found, one per line, so that one run shows all
 * of them; the k3 command maps it to exit code 2.
 */
public final class ConfigException extends RuntimeException {
    private final String source;
    private final List<String> problems;

    public ConfigException(String source, List<String> problems) {
        super(message(source, problems));
        this.source = source;
        this.problems = problems.stream().map(ConfigException::oneLine).toList();
    }

    public ConfigException(String source, String problem, Throwable cause) {
        super(message(source, List.of(problem)), cause);
        this.source = source;
        this.problems = List.of(oneLine(problem));
    }

    /** Where the config came from: a path, or the name a caller gave an embedded config. */
    public String source() {
        return source;
    }

    /** Every problem found, in the order the reader looked (field table order, then range and consistency rules). */
    public List<String> problems() {
        return problems;
    }

    /** A problem quoting foreign text (a parser message, a JSON value) stays on its one line. */
    private static String oneLine(String problem) {
        return problem.replace("\r", " ").replace("\n", " ");
    }

    private static String message(String source, List<String> problems) {
        var sb = new StringBuilder();
        sb.append("config ").append(source).append(" refused, ").append(problems.size()).append(" problem(s):\n");
        for (String p : problems) sb.append("    ").append(oneLine(p)).append('\n');
        sb.append("refusing to substitute defaults: a config this reader cannot fully understand would silently produce a DIFFERENT model.");
        return sb.toString();
    }
}
