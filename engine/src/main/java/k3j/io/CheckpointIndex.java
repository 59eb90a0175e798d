package k3j.io;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.stream.IntStream;
import k3j.io.CheckpointException.Rule;

/**
 * Every tensor of a checkpoint by name, over all its shards. {@link #open} takes a directory or one
 * {@code .safetensors} file. In a directory with {@value #INDEX_FILE}, the shards are the ones the index
 * lists, and the index must agree with the headers exactly: a listed shard that is missing, a listed
 * tensor absent from its shard's header, or a header tensor the index does not list is ONE
 * {@link Rule#PARTIAL_DOWNLOAD} error naming them all. Without an index, the shards are every
 * {@code *.safetensors} file in the directory. Either way shards are numbered in byte-wise sorted
 * order of their file names. A name in two shards is refused.
 */
public final class CheckpointIndex {
    public static final String INDEX_FILE = "model.safetensors.index.json";
    /** Largest index.json read: the released checkpoint's 497,052 names take about 40 MB. */
    public static final long MAX_INDEX_BYTES = 1L << 28;
    private static final int LISTED = 8;

    private final Path path;
    private final Path indexFile;
    private final List<SafetensorsFile> shards;
    private final List<TensorInfo> tensors;
    private final Map<String, TensorInfo> byName;

    private CheckpointIndex(Path path, Path indexFile, List<SafetensorsFile> shards, List<TensorInfo> tensors,
                            Map<String, TensorInfo> byName) {
        this.path = path;
        this.indexFile = indexFile;
        this.shards = shards;
        this.tensors = tensors;
        this.byName = byName;
    }

    /** Opens a model directory or one safetensors file, validating every header. */
    public static CheckpointIndex open(Path path) {
        if (Files.isDirectory(path)) return openDirectory(path);
        if (Files.isRegularFile(path)) return build(path, null, List.of(SafetensorsFile.openUnchecked(path, 0)));
        throw new CheckpointException(Rule.IO, path, null, "no such file or directory");
    }

    private static CheckpointIndex openDirectory(Path dir) {
        Path indexFile = dir.resolve(INDEX_FILE);
        if (Files.exists(indexFile)) return openIndexed(dir, indexFile);
        List<Path> files = listShards(dir);
        if (files.isEmpty()) {
            throw new CheckpointException(Rule.NO_SHARDS, dir, null, "no .safetensors files in the directory");
        }
        return build(dir, null, parseEach(files).all());
    }

    /** Every regular {@code *.safetensors} file in {@code dir}, in byte-wise name order. */
    private static List<Path> listShards(Path dir) {
        List<Path> files = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir)) {
            for (Path p : ds) {
                if (!p.getFileName().toString().endsWith(".safetensors")) continue;
                if (!Files.isRegularFile(p)) {
                    // a FIFO or device named like a shard: refused, never skipped (skipping would hide a shard)
                    try {
                        SafeFiles.requireRegular(p, "a safetensors shard");
                    } catch (IOException e) {
                        throw new CheckpointException(Rule.NOT_REGULAR, p, null, SafeFiles.why(e));
                    }
                }
                files.add(p);
            }
        } catch (IOException e) {
            throw new CheckpointException(Rule.IO, dir, null, "cannot list the directory: " + e, e);
        }
        files.sort((a, b) -> compareBytes(a.getFileName().toString(), b.getFileName().toString()));
        return files;
    }

    /** Plain byte-wise order of the UTF-8 names (strcmp order), not String's UTF-16 order. */
    static int compareBytes(String a, String b) {
        return Arrays.compareUnsigned(a.getBytes(StandardCharsets.UTF_8), b.getBytes(StandardCharsets.UTF_8));
    }

    /** Shards parsed in parallel, file i as shard i; failures kept per file. */
    private record Parsed(List<Path> files, SafetensorsFile[] shards, RuntimeException[] failed) {
        /** The shards; the first failure in shard order is the one reported. */
        List<SafetensorsFile> all() {
            for (RuntimeException e : failed) if (e != null) throw e;
            return Arrays.asList(shards);
        }
    }

    private static Parsed parseEach(List<Path> files) {
        int n = files.size();
        SafetensorsFile[] parsed = new SafetensorsFile[n];
        RuntimeException[] failed = new RuntimeException[n];
        IntStream.range(0, n).parallel().forEach(i -> {
            try {
                parsed[i] = SafetensorsFile.openUnchecked(files.get(i), i);
            } catch (RuntimeException e) {
                failed[i] = e;
            }
        });
        return new Parsed(files, parsed, failed);
    }

    /** One map over every shard's names; refuses a name twice, in one header or across two. */
    private static CheckpointIndex build(Path path, Path indexFile, List<SafetensorsFile> shards) {
        int total = 0;
        for (SafetensorsFile s : shards) total += s.tensors().size();
        Map<String, TensorInfo> byName = HashMap.newHashMap(total);
        List<TensorInfo> all = new ArrayList<>(total);
        for (SafetensorsFile s : shards) {
            for (TensorInfo t : s.tensors()) {
                TensorInfo first = byName.putIfAbsent(t.name(), t);
                if (first != null && first.file().equals(t.file())) throw SafetensorsFile.duplicate(t);
                if (first != null) {
                    throw new CheckpointException(Rule.DUPLICATE_NAME, t.file(), t.name(),
                            "also in shard " + first.file().getFileName() + "; names must be unique across shards");
                }
                all.add(t);
            }
        }
        return new CheckpointIndex(path, indexFile, List.copyOf(shards), Collections.unmodifiableList(all), byName);
    }

    // ---------------------------------------------------------------------------------------------
    // model.safetensors.index.json

    /** The index's weight_map as parallel arrays: names[i] lives in shardFiles[shardOf[i]]. */
    private record WeightMap(String[] names, int[] shardOf, List<String> shardFiles) {}

    private static CheckpointIndex openIndexed(Path dir, Path indexFile) {
        // The index (60 MB for K3) parses on one thread while the shards the directory holds parse on the
        // others; in the usual case (they are exactly the listed shards) that work is kept.
        CompletableFuture<WeightMap> pending = CompletableFuture.supplyAsync(() -> readWeightMap(indexFile));
        Parsed onDisk = parseEach(listShards(dir));
        WeightMap wm;
        try {
            wm = pending.join();
        } catch (CompletionException e) {
            if (e.getCause() instanceof RuntimeException r) throw r;
            if (e.getCause() instanceof Error err) throw err;
            throw e;
        }
        // shards are numbered by byte-wise sorted file name
        List<String> sortedFiles = new ArrayList<>(wm.shardFiles());
        sortedFiles.sort(CheckpointIndex::compareBytes);
        List<String> missingShards = new ArrayList<>();
        List<Path> present = new ArrayList<>();
        for (String f : sortedFiles) {
            Path p = dir.resolve(f);
            if (Files.isRegularFile(p)) present.add(p);
            else missingShards.add(f);
        }
        List<SafetensorsFile> shards = missingShards.isEmpty() && present.equals(onDisk.files()) ? onDisk.all()
                : missingShards.isEmpty() ? parseEach(present).all() : parseAllNumbered(present, sortedFiles);
        CheckpointIndex index = build(dir, indexFile, shards);

        // every listed tensor must be in the header of the shard the index names ...
        int[] shardOfFile = new int[wm.shardFiles().size()];     // weight_map file id -> shard number
        boolean[] fileMissing = new boolean[shardOfFile.length];
        for (int id = 0; id < shardOfFile.length; id++) {
            shardOfFile[id] = sortedFiles.indexOf(wm.shardFiles().get(id));
            fileMissing[id] = missingShards.contains(wm.shardFiles().get(id));
        }
        List<String> missingTensors = new ArrayList<>();
        long missingTensorCount = 0, inMissingShards = 0, matched = 0, listedMix = 0;
        for (int i = 0; i < wm.names().length; i++) {
            int id = wm.shardOf()[i];
            String file = wm.shardFiles().get(id);
            TensorInfo t = index.byName.get(wm.names()[i]);
            if (fileMissing[id]) {
                inMissingShards++;
            } else if (t == null || t.shard() != shardOfFile[id]) {
                if (missingTensorCount++ < LISTED) missingTensors.add(CheckpointException.quote(wm.names()[i]) + " (" + file + ")");
            } else {
                matched++;
                listedMix += mix(t);
            }
        }
        // ... and every header tensor listed exactly once. As many matches as tensors, with the same sum
        // of a per-tensor mix, means no name was listed twice in place of another (a hash set of 497,052
        // names would cost a quarter of the open); any doubt takes the exact path below.
        long headerMix = 0;
        for (TensorInfo t : index.tensors()) headerMix += mix(t);
        List<String> unlisted = new ArrayList<>();
        List<String> twice = new ArrayList<>();
        long unlistedCount = 0, twiceCount = 0;
        if (matched != index.size() || listedMix != headerMix) {
            Set<String> listed = HashSet.newHashSet(wm.names().length);
            for (String n : wm.names()) {
                if (!listed.add(n) && twiceCount++ < LISTED) twice.add(CheckpointException.quote(n));
            }
            for (TensorInfo t : index.tensors()) {
                if (!listed.contains(t.name()) && unlistedCount++ < LISTED) {
                    unlisted.add(CheckpointException.quote(t.name()) + " (" + t.file().getFileName() + ")");
                }
            }
        }
        if (!missingShards.isEmpty() || missingTensorCount > 0 || unlistedCount > 0) {
            StringBuilder b = new StringBuilder("the index and the shards disagree (a partial download?)");
            if (!missingShards.isEmpty()) {
                b.append("; ").append(missingShards.size()).append(" of ").append(sortedFiles.size())
                        .append(" shards missing (holding ").append(inMissingShards).append(" listed tensor(s)): ")
                        .append(list(missingShards, missingShards.size()));
            }
            if (missingTensorCount > 0) {
                b.append("; ").append(missingTensorCount).append(" listed tensor(s) not in their shard's header: ")
                        .append(list(missingTensors, missingTensorCount));
            }
            if (unlistedCount > 0) {
                b.append("; ").append(unlistedCount).append(" header tensor(s) not in the index: ")
                        .append(list(unlisted, unlistedCount));
            }
            throw new CheckpointException(Rule.PARTIAL_DOWNLOAD, indexFile, null, b.toString());
        }
        if (twiceCount > 0) {
            throw new CheckpointException(Rule.BAD_INDEX, indexFile, null,
                    twiceCount + " name(s) listed twice in weight_map: " + list(twice, twiceCount));
        }
        return index;
    }

    /** A tensor's identity as 64 well-mixed bits (murmur3's finaliser over shard, offset and name hash). */
    private static long mix(TensorInfo t) {
        long x = t.offset() * 0x9E3779B97F4A7C15L + ((long) t.shard() << 32 | (t.name().hashCode() & 0xffffffffL));
        x ^= x >>> 33;
        x *= 0xff51afd7ed558ccdL;
        x ^= x >>> 33;
        x *= 0xc4ceb9fe1a85ec53L;
        return x ^ (x >>> 33);
    }

    /** Parses the present shards keeping the numbers they would have if none were missing. */
    private static List<SafetensorsFile> parseAllNumbered(List<Path> present, List<String> allSorted) {
        List<SafetensorsFile> out = new ArrayList<>();
        for (Path p : present) out.add(SafetensorsFile.openUnchecked(p, allSorted.indexOf(p.getFileName().toString())));
        return out;
    }

    private static String list(List<String> items, long total) {
        String s = String.join(", ", items.subList(0, Math.min(items.size(), LISTED)));
        return total > LISTED ? s + ", and " + (total - LISTED) + " more" : s;
    }

    private static WeightMap readWeightMap(Path indexFile) {
        byte[] bytes;
        try {
            long size = SafeFiles.requireRegular(indexFile, "a checkpoint index");
            if (size > MAX_INDEX_BYTES) {
                throw new CheckpointException(Rule.BAD_INDEX, indexFile, null, "index is " + size + " bytes, more than " + MAX_INDEX_BYTES + ": not read");
            }
            bytes = SafeFiles.readAll(indexFile, MAX_INDEX_BYTES, "a checkpoint index");
        } catch (IOException e) {
            throw new CheckpointException(Files.isRegularFile(indexFile) ? Rule.IO : Rule.NOT_REGULAR, indexFile, null, SafeFiles.why(e), e);
        }
        List<String> names = new ArrayList<>();
        int[] shardOf = new int[1024];
        Map<String, Integer> fileIds = new TreeMap<>();
        List<String> files = new ArrayList<>();
        boolean sawMap = false;
        String lastFile = null;
        int lastId = -1;
        try (JsonParser p = SafetensorsFile.JSON.createParser(bytes)) {
            if (p.nextToken() != JsonToken.START_OBJECT) {
                throw new CheckpointException(Rule.BAD_INDEX, indexFile, null, "index is not a JSON object");
            }
            java.util.Set<String> topKeys = new java.util.HashSet<>();
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String key = p.currentName();
                if (!topKeys.add(key)) {
                    // a second weight_map (even an empty one) would be read as the first or the last depending on the reader
                    throw new CheckpointException(Rule.BAD_INDEX, indexFile, null, "the index holds \"" + key + "\" twice; which one is the model's is ambiguous");
                }
                JsonToken v = p.nextToken();
                if (!key.equals("weight_map")) {
                    p.skipChildren();   // "metadata" (total_size, ...) is informational
                    continue;
                }
                sawMap = true;
                if (v != JsonToken.START_OBJECT) {
                    throw new CheckpointException(Rule.BAD_INDEX, indexFile, null, "weight_map is not a JSON object");
                }
                while (p.nextToken() == JsonToken.FIELD_NAME) {
                    String name = p.currentName();
                    if (p.nextToken() != JsonToken.VALUE_STRING) {
                        throw new CheckpointException(Rule.BAD_INDEX, indexFile, name, "weight_map value is not a string");
                    }
                    // nearly every entry names the same shard as the one before: compare without a String
                    int id;
                    if (lastFile != null && sameText(p, lastFile)) {
                        id = lastId;
                    } else {
                        String file = p.getText();
                        if (!isPlainShardName(file)) {
                            throw new CheckpointException(Rule.BAD_INDEX, indexFile, name,
                                    "shard " + CheckpointException.quote(file) + " is not a .safetensors file name in the directory");
                        }
                        Integer known = fileIds.get(file);
                        if (known == null) {
                            known = files.size();
                            fileIds.put(file, known);
                            files.add(file);
                        }
                        id = known;
                        lastFile = file;
                        lastId = id;
                    }
                    if (names.size() == shardOf.length) shardOf = Arrays.copyOf(shardOf, shardOf.length * 2);
                    shardOf[names.size()] = id;
                    names.add(name);
                }
            }
            if (p.nextToken() != null) {
                throw new CheckpointException(Rule.BAD_INDEX, indexFile, null, "content after the index object");
            }
        } catch (JsonProcessingException e) {
            throw new CheckpointException(Rule.BAD_INDEX, indexFile, null,
                    "index is not valid JSON: " + e.getOriginalMessage(), e);
        } catch (IOException e) {
            throw new CheckpointException(Rule.IO, indexFile, null, "cannot parse: " + e, e);
        }
        if (!sawMap) throw new CheckpointException(Rule.BAD_INDEX, indexFile, null, "index has no weight_map");
        if (files.isEmpty()) throw new CheckpointException(Rule.NO_SHARDS, indexFile, null, "index lists no shards");
        return new WeightMap(names.toArray(new String[0]), Arrays.copyOf(shardOf, names.size()), files);
    }

    private static boolean sameText(JsonParser p, String s) throws IOException {
        int len = p.getTextLength();
        if (len != s.length()) return false;
        char[] buf = p.getTextCharacters();
        int off = p.getTextOffset();
        for (int i = 0; i < len; i++) if (buf[off + i] != s.charAt(i)) return false;
        return true;
    }

    private static boolean isPlainShardName(String f) {
        return f.endsWith(".safetensors") && f.indexOf('/') < 0 && f.indexOf('\\') < 0 && f.indexOf('\0') < 0
                && !f.startsWith("..");
    }

    // ---------------------------------------------------------------------------------------------
    // lookups

    /** The directory or file this index was opened from. */
    public Path path() {
        return path;
    }

    /** The index JSON this checkpoint was opened through, if any. */
    public Optional<Path> indexFile() {
        return Optional.ofNullable(indexFile);
    }

    /** The shards in shard-number order. */
    public List<SafetensorsFile> shards() {
        return shards;
    }

    /** Every tensor, shard by shard, each shard's in header order. */
    public List<TensorInfo> tensors() {
        return tensors;
    }

    public int size() {
        return tensors.size();
    }

    public Optional<TensorInfo> find(String name) {
        return Optional.ofNullable(byName.get(name));
    }

    /** The tensor named {@code name}; a missing one is a {@link Rule#NO_SUCH_TENSOR} error. */
    public TensorInfo tensor(String name) {
        TensorInfo t = byName.get(name);
        if (t == null) throw new CheckpointException(Rule.NO_SUCH_TENSOR, path, name, "no such tensor in the checkpoint");
        return t;
    }
}
