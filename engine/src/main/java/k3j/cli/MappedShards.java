package k3j.cli;

import java.io.IOException;
import java.nio.file.Files;
import k3j.io.CheckpointIndex;
import k3j.io.SafetensorsFile;

/**
 * A memory-mapped shard truncated during a run makes the next access to a lost page fault, which the JVM
 * reports as an {@link InternalError} from inside a kernel. The sizes were checked at open; on such a fault
 * they are checked again, so the run ends naming the file that shrank (exit 4), never with a stack trace.
 */
final class MappedShards {
    private MappedShards() {}

    static String describeFault(CheckpointIndex index, InternalError e) {
        if (index != null) {
            for (SafetensorsFile s : index.shards()) {
                long now;
                try {
                    now = Files.size(s.file());
                } catch (IOException gone) {
                    return s.file() + " disappeared during the run (" + gone.getMessage() + "): its mapped weights are gone";
                }
                if (now < s.fileSize()) {
                    return s.file() + " was truncated during the run (" + now + " bytes now, " + s.fileSize() + " when indexed): its mapped weights are gone";
                }
            }
        }
        return "a memory access to the mapped weights faulted (" + e.getMessage() + "), and no shard is shorter than when indexed";
    }
}
