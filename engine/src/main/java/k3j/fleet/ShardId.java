package k3j.fleet;

import java.util.Map;

/**
 * Shard {@code index} of {@code count} (zero-based): from {@code --shard I/N}, or {@code --shard auto} from the launcher's
 * environment. The count is never guessed: {@code K3_SHARD_COUNT} when set (a resubmitted Slurm task sees an array of one),
 * else Slurm's own array size; Kubernetes and PBS state no count, so {@code K3_SHARD_COUNT} is required there.
 */
public record ShardId(int index, int count) {
    /** More shards than this is a typo, not a fleet (the released model has 93 layers and one logit part). */
    public static final int MAX_COUNT = 4096;

    public ShardId {
        if (count < 1 || count > MAX_COUNT) throw new IllegalArgumentException("shard count " + count + " is outside 1-" + MAX_COUNT);
        if (index < 0 || index >= count) throw new IllegalArgumentException("shard index " + index + " is outside 0-" + (count - 1) + " (shards of " + count + " count from 0)");
    }

    /** "3/8", or "auto" read from {@code env}; a malformed form or a missing variable is an IllegalArgumentException naming it. */
    public static ShardId parse(String spec, Map<String, String> env) {
        if (spec.equals("auto")) return auto(env);
        int slash = spec.indexOf('/');
        if (slash < 0) throw new IllegalArgumentException("--shard " + spec + ": give I/N (shard I of N, from 0) or auto");
        return new ShardId(number(spec.substring(0, slash), "--shard " + spec + " index"), number(spec.substring(slash + 1), "--shard " + spec + " count"));
    }

    /** The launcher's array index: Slurm, a Kubernetes Indexed Job, or PBS (docs/formats.md §18.1). */
    public static ShardId auto(Map<String, String> env) {
        String given = env.get("K3_SHARD_COUNT");
        if (env.containsKey("SLURM_ARRAY_TASK_ID")) {
            int id = number(env.get("SLURM_ARRAY_TASK_ID"), "SLURM_ARRAY_TASK_ID");
            if (given != null) return new ShardId(id, number(given, "K3_SHARD_COUNT"));
            if (env.containsKey("SLURM_ARRAY_TASK_COUNT")) return new ShardId(id, number(env.get("SLURM_ARRAY_TASK_COUNT"), "SLURM_ARRAY_TASK_COUNT"));
            if (env.containsKey("SLURM_ARRAY_TASK_MAX")) {
                int min = number(env.getOrDefault("SLURM_ARRAY_TASK_MIN", "0"), "SLURM_ARRAY_TASK_MIN");
                if (min != 0) throw new IllegalArgumentException("--shard auto: the Slurm array starts at " + min + ", not 0: submit --array=0-(N-1) or set K3_SHARD_COUNT");
                return new ShardId(id, number(env.get("SLURM_ARRAY_TASK_MAX"), "SLURM_ARRAY_TASK_MAX") + 1);
            }
            throw new IllegalArgumentException("--shard auto: SLURM_ARRAY_TASK_ID is set but no count (SLURM_ARRAY_TASK_COUNT, SLURM_ARRAY_TASK_MAX or K3_SHARD_COUNT)");
        }
        for (String index : new String[] {"JOB_COMPLETION_INDEX", "PBS_ARRAY_INDEX"}) {
            if (!env.containsKey(index)) continue;
            if (given == null) throw new IllegalArgumentException("--shard auto: " + index + " is set but K3_SHARD_COUNT is not (the launcher states no count: set it to the job's completions / array size)");
            return new ShardId(number(env.get(index), index), number(given, "K3_SHARD_COUNT"));
        }
        throw new IllegalArgumentException("--shard auto: none of SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX, PBS_ARRAY_INDEX is set (not run by an array job?): give --shard I/N");
    }

    /** The shard's folder under the results root: {@code shard-3-of-8}. */
    public String folderName() {
        return "shard-" + index + "-of-" + count;
    }

    @Override
    public String toString() {
        return index + "/" + count;
    }

    /** A whole number; one past any shard count (up to 64 digits) is said to be out of range, not "not a number". */
    private static int number(String s, String what) {
        String t = s == null ? "" : s.trim();
        if (!t.matches("[+-]?[0-9]{1,64}")) throw new IllegalArgumentException(what + " '" + s + "' is not a whole number");
        java.math.BigInteger n = new java.math.BigInteger(t);
        if (n.signum() < 0 || n.compareTo(java.math.BigInteger.valueOf(MAX_COUNT)) > 0) {
            throw new IllegalArgumentException(what + " " + t + " is out of range: shards count from 0 and there are at most " + MAX_COUNT);
        }
        return n.intValueExact();
    }
}
