package k3j.io;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * Where a command may write (docs/files.md). Every output is checked here before any work, and written through
 * {@link AtomicWrite} (a temporary beside it, renamed over it when complete):
 * <ul>
 *   <li>an output file is a regular file or a new name in an existing, writable folder: never a symbolic link, a
 *       device, a FIFO, a socket or a folder (the rename would replace a device node such as /dev/null; as root it does);</li>
 *   <li>it is none of the command's inputs (a shard, the index, the config, the state, the reference...),
 *       compared by file identity (device and inode) and by real path, so a hard link or a symbolic link to an
 *       input is caught too;</li>
 *   <li>no two outputs of one command name the same file, and no output file lies inside an output folder
 *       (which is replaced whole);</li>
 *   <li>an output folder is an existing folder or a new name in an existing folder, and holds none of the
 *       inputs.</li>
 * </ul>
 * An input registered with a role (e.g. --history read and rewritten by a chat) may be replaced by the output of
 * that same role only.
 */
public final class Outputs {
    /** One file (or folder) a command reads or writes: what named it, where it really is, its identity when it exists. */
    private record Named(String what, String role, Path real, Object key, boolean folder) {
        boolean same(Named o) {
            return real.equals(o.real) || (key != null && key.equals(o.key));
        }
    }

    private final List<Named> inputs = new ArrayList<>(), outputs = new ArrayList<>();

    /**
     * Registers an input: a file, or a folder together with every regular file directly in it (a model folder: its
     * shards, index and config). A path that does not exist is nothing to protect and is ignored.
     */
    public Outputs input(Path p, String what) {
        return input(p, what, null);
    }

    /** An input that the output of the same {@code role} may replace (a chat's --history, read and saved after every turn). */
    public Outputs input(Path p, String what, String role) {
        if (p == null) return this;
        Named n = identify(p, what, role);
        if (n == null) return this;
        inputs.add(n);
        if (n.folder) inside(p, what, role, FOLDER_DEPTH);
        return this;
    }

    /** How deep into an input folder its files are protected (a results root's shard folders: their plans and results). */
    static final int FOLDER_DEPTH = 3;
    /** At most this many files of input folders are registered (a folder of a million files is not walked whole). */
    static final int MAX_FOLDER_FILES = 1 << 16;

    private void inside(Path dir, String what, String role, int depth) {
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir)) {
            for (Path f : ds) {
                if (inputs.size() >= MAX_FOLDER_FILES) return;
                if (Files.isRegularFile(f)) {
                    Named m = identify(f, what, role);
                    if (m != null) inputs.add(m);
                } else if (depth > 1 && Files.isDirectory(f, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
                    inside(f, what, role, depth - 1);
                }
            }
        } catch (IOException e) {
            // an unreadable folder: its reader fails naming it; only its own identity is protected here
        }
    }

    /** Checks and claims an output file named by {@code flag}; the path, for chaining. */
    public Path file(Path target, String flag) throws IOException {
        return file(target, flag, null);
    }

    /** An output file of a role (see {@link #input(Path, String, String)}): it may replace the input of that role. */
    public Path file(Path target, String flag, String role) throws IOException {
        if (target == null) return null;
        checkFile(target, flag);
        Named out = identify(target, flag, role);
        for (Named in : inputs) {
            if (!in.folder && out.same(in) && !(role != null && role.equals(in.role))) {
                throw refuse(target, flag, "it is " + in.what + ", an input of this command; writing it would destroy it: name another file");
            }
        }
        claim(target, flag, out);
        return target;
    }

    /** Checks and claims an output folder named by {@code flag} (replaced whole by {@link AtomicWrite#replaceFolder}). */
    public Path folder(Path target, String flag) throws IOException {
        if (target == null) return null;
        checkFolder(target, flag);
        Named out = identify(target, flag, null);
        out = new Named(out.what, null, out.real, out.key, true);
        for (Named in : inputs) {
            if (in.real.startsWith(out.real) || out.same(in)) {
                throw refuse(target, flag, "it holds " + in.what + " (" + in.real + "), an input of this command: name a new folder");
            }
        }
        claim(target, flag, out);
        return target;
    }

    private void claim(Path target, String flag, Named out) throws IOException {
        for (Named o : outputs) {
            if (o.same(out)) throw refuse(target, flag, "it is also named by " + o.what + ": give each output its own file");
            if (o.folder && !out.folder && out.real.startsWith(o.real)) {
                throw refuse(target, flag, "it lies inside " + o.what + " " + o.real + ", which is written whole: name a file outside it");
            }
            if (out.folder && !o.folder && o.real.startsWith(out.real)) {
                throw refuse(target, flag, "it holds " + o.what + " " + o.real + ", and is written whole: name a folder that holds no other output");
            }
        }
        outputs.add(out);
    }

    /**
     * An output file on its own: its folder exists and is writable, and the path is a regular file or a new name
     * (never a symbolic link). The same check runs again just before the rename.
     */
    public static void checkFile(Path target, String flag) throws IOException {
        Path abs = target.toAbsolutePath();
        checkParent(target, abs, flag);
        BasicFileAttributes a = attributes(abs);
        if (a != null && !a.isRegularFile()) {
            throw refuse(target, flag, "it is " + SafeFiles.kind(abs, a) + "; an output must be a regular file or a new name in an existing folder "
                    + "(it is written to a temporary file and renamed over the target, which would replace " + (a.isDirectory() ? "the folder" : "the device node") + ")");
        }
        refuseLink(target, abs, flag);
    }

    /** The folder an output goes into exists and is writable. */
    private static void checkParent(Path target, Path abs, String flag) throws IOException {
        // '' resolves to the working folder: said as what it is, not as "a directory"
        if (target.toString().isEmpty()) throw new IOException("cannot write '' (" + flag + "): the path is empty: name a file or folder");
        Path dir = abs.getParent();
        if (dir == null || !Files.isDirectory(dir)) throw refuse(target, flag, "its folder " + dir + " does not exist: create it first or name another path");
        if (!Files.isWritable(dir)) throw refuse(target, flag, "its folder " + dir + " is not writable");
    }

    /** An output folder on its own: an existing folder, or a new name in an existing, writable folder. */
    public static void checkFolder(Path target, String flag) throws IOException {
        Path abs = target.toAbsolutePath();
        checkParent(target, abs, flag);
        refuseLink(target, abs, flag);
        BasicFileAttributes a = attributes(abs);
        if (a != null && !a.isDirectory()) throw refuse(target, flag, "it is " + (a.isRegularFile() ? "a file" : SafeFiles.kind(abs, a)) + ", not a folder: name a folder or a new name");
    }

    /**
     * An output is never a symbolic link: renaming over it would replace the link, while a plain write would go where it
     * points (another folder, an input); either way what is written is not where the name says.
     */
    private static void refuseLink(Path target, Path abs, String flag) throws IOException {
        if (Files.isSymbolicLink(abs)) {
            Path to;
            try {
                to = Files.readSymbolicLink(abs);
            } catch (IOException e) {
                to = null;
            }
            throw refuse(target, flag, "it is a symbolic link" + (to == null ? "" : " to " + to) + "; an output is written where it is named: name the real path or a new name");
        }
    }

    private static IOException refuse(Path target, String flag, String why) {
        return new IOException("cannot write " + target + " (" + flag + "): " + why);
    }

    /** Attributes following links, or null when nothing is there (a dangling link counts as nothing). */
    private static BasicFileAttributes attributes(Path p) throws IOException {
        try {
            return Files.readAttributes(p, BasicFileAttributes.class);
        } catch (NoSuchFileException e) {
            return null;
        }
    }

    /** Where {@code p} really is: its real path (links resolved), or its real folder plus its name when it does not exist yet. */
    private static Named identify(Path p, String what, String role) {
        Path abs = p.toAbsolutePath().normalize();
        try {
            BasicFileAttributes a = attributes(abs);
            if (a != null) return new Named(what, role, abs.toRealPath(), a.fileKey(), a.isDirectory());
            Path dir = abs.getParent();
            Path real = dir != null && Files.isDirectory(dir) ? dir.toRealPath().resolve(Objects.requireNonNull(abs.getFileName())) : abs;
            return new Named(what, role, real, null, false);
        } catch (IOException e) {
            return new Named(what, role, abs, null, false);
        }
    }

    /** The outputs claimed so far, for messages and tests. */
    public Set<Path> claimed() {
        Set<Path> s = new java.util.LinkedHashSet<>();
        for (Named n : outputs) s.add(n.real);
        return s;
    }
}
