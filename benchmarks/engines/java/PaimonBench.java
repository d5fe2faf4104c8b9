/*
 * Apache Paimon's Java core as a benchmark engine: one step of a suite per JVM, timed around the
 * library calls only, printing the harness's one result line (benchmarks/harness/measure.py).
 *
 * Usage: java -cp <paimon + hadoop jars>:<classes> PaimonBench SUITE java STEP --input DATA --target DIR
 *        [--upserts N] [--states N ...] [--key-range LOW HIGH] [--warm N] [--threads N]
 *
 * Suites: pk (steps write, upsert, read, range_read, build), the same table definition and
 * dataset files as the Python engines' (key id, 4 buckets, Parquet, zstd level 1).
 *
 * Inputs (Arrow IPC) become Paimon BinaryRows before the timer, as a Flink source would hand them
 * over; reads consume every row the reader returns (the check's sums are taken in that loop).
 * With --warm N the step runs N times first (writes and upserts on throwaway copies of the
 * target), so the measured run is JIT-compiled: Java's steady state, not its start-up.
 *
 * With --threads N (default 1) a write or upsert runs N BatchTableWrites of one write builder on N
 * threads, as N Flink sink subtasks would: the rows' buckets are computed on the N threads (the
 * keyBy's hash), each writer takes the buckets b with b % N == its index, and one commit takes all
 * their messages. A read hands the plan's splits round-robin to N threads, each with its own reader.
 */

import com.sun.management.OperatingSystemMXBean;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.ipc.ArrowFileReader;
import org.apache.paimon.arrow.reader.ArrowBatchReader;
import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.data.serializer.InternalRowSerializer;
import org.apache.paimon.disk.IOManager;
import org.apache.paimon.options.Options;
import org.apache.paimon.predicate.Predicate;
import org.apache.paimon.predicate.PredicateBuilder;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.schema.Schema;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.paimon.Snapshot;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.CommitMessage;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.table.source.Split;
import org.apache.paimon.table.source.TableRead;
import org.apache.paimon.types.DataTypes;
import org.apache.paimon.types.RowType;

import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;

public final class PaimonBench {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String RESULT_PREFIX = "BENCH_RESULT ";
    private static final String DATABASE = "bench";
    private static final String PK_TABLE = "pk";
    private static final String KEY = "id";
    private static final Map<String, String> PK_OPTIONS = Map.of(
            "bucket", "4", "file.format", "parquet", "file.compression", "zstd",
            "file.compression.zstd-level", "1");
    private static final RowType PK_ROW = RowType.builder()
            .field(KEY, DataTypes.BIGINT().notNull())
            .field("v_int", DataTypes.BIGINT())
            .field("v_float", DataTypes.DOUBLE())
            .field("v_str", DataTypes.STRING())
            .field("v_ts", DataTypes.TIMESTAMP(6))
            .field("v_i32", DataTypes.INT())
            .build();

    /** The command line: the harness's step options that this engine uses. */
    private static final class Args {
        String suite;
        String step;
        Path input;
        Path target;
        int upserts = 1;
        List<Integer> states = new ArrayList<>();
        long low;
        long high;
        boolean ranged;
        int warm;
        int threads = 1;

        static Args parse(String[] argv) {
            Args args = new Args();
            if (argv.length < 3) {
                throw new IllegalArgumentException("usage: PaimonBench SUITE java STEP --input DATA --target DIR ...");
            }
            args.suite = argv[0];
            args.step = argv[2];
            for (int i = 3; i < argv.length; i++) {
                switch (argv[i]) {
                    case "--input": args.input = Paths.get(argv[++i]); break;
                    case "--target": args.target = Paths.get(argv[++i]); break;
                    case "--upserts": args.upserts = Integer.parseInt(argv[++i]); break;
                    case "--warm": args.warm = Integer.parseInt(argv[++i]); break;
                    case "--threads": args.threads = Integer.parseInt(argv[++i]); break;
                    case "--key-range":
                        args.low = Long.parseLong(argv[++i]);
                        args.high = Long.parseLong(argv[++i]);
                        args.ranged = true;
                        break;
                    case "--states":
                        while (i + 1 < argv.length && !argv[i + 1].startsWith("--")) {
                            args.states.add(Integer.parseInt(argv[++i]));
                        }
                        break;
                    default: throw new IllegalArgumentException("unknown option " + argv[i]);
                }
            }
            return args;
        }
    }

    /** What a step returns for the driver to compare: committed rows, or a read's fingerprint. */
    private interface Action {
        ObjectNode run() throws Exception;
    }

    public static void main(String[] argv) throws Exception {
        Args args = Args.parse(argv);
        if (!args.suite.equals("pk")) {
            throw new IllegalArgumentException("the Java engine takes part in the pk suite only, not " + args.suite);
        }
        java.io.PrintStream results = System.out;
        System.setOut(System.err);  // whatever Paimon or Hadoop print stays off the result line
        ObjectNode result;
        switch (args.step) {
            case "write": result = write(args); break;
            case "upsert": result = upsert(args); break;
            case "read":
            case "range_read": result = read(args); break;
            case "build": result = build(args); break;
            default: throw new IllegalArgumentException("no step " + args.step + " in suite pk");
        }
        results.println(RESULT_PREFIX + JSON.writeValueAsString(result));
        results.flush();
        System.exit(0);
    }

    // ---- steps --------------------------------------------------------------------------------

    private static ObjectNode write(Args args) throws Exception {
        List<InternalRow> rows = arrowRows(args.input.resolve("base.arrow"), -1);
        for (int i = 0; i < args.warm; i++) {
            Path scratch = scratch(args.target, i);
            writeOnce(scratch, rows, args.threads);
            deleteTree(scratch);
        }
        return measure(() -> writeOnce(args.target, rows, args.threads));
    }

    private static ObjectNode upsert(Args args) throws Exception {
        List<InternalRow> rows = arrowRows(args.input.resolve("upserts.arrow"), args.upserts - 1);
        for (int i = 0; i < args.warm; i++) {
            Path scratch = scratch(args.target, i);
            copyTree(args.target, scratch);
            upsertOnce(scratch, rows, args.threads);
            deleteTree(scratch);
        }
        return measure(() -> upsertOnce(args.target, rows, args.threads));
    }

    private static ObjectNode read(Args args) throws Exception {
        try (Catalog catalog = catalog(args.target)) {
            FileStoreTable table = pkTable(catalog);
            for (int i = 0; i < args.warm; i++) {
                readOnce(table, args);
            }
            return measure(() -> readOnce(table, args));
        }
    }

    /** Not measured: the base write and upserts 1..max(states), the table copied after each state wanted. */
    private static ObjectNode build(Args args) throws Exception {
        TreeSet<Integer> states = new TreeSet<>(args.states);
        Path work = args.target.resolve("building");
        deleteTree(work);
        long start = System.nanoTime();
        writeOnce(work, arrowRows(args.input.resolve("base.arrow"), -1), 1);
        for (int index = 0; index <= states.last(); index++) {
            if (index > 0) {
                upsertOnce(work, arrowRows(args.input.resolve("upserts.arrow"), index - 1), 1);
            }
            if (states.contains(index)) {
                copyTree(work, args.target.resolve("state_" + index));
            }
        }
        deleteTree(work);
        ObjectNode result = JSON.createObjectNode();
        result.put("seconds", (System.nanoTime() - start) / 1e9);
        result.put("cpu_seconds", cpuSeconds());
        result.put("base_rss_mib", 0.0);
        result.put("peak_rss_mib", peakRssMib());
        result.putObject("check").put("states", states.size());
        return result;
    }

    private static ObjectNode writeOnce(Path warehouse, List<InternalRow> rows, int threads) throws Exception {
        try (Catalog catalog = catalog(warehouse)) {
            catalog.createDatabase(DATABASE, true);
            Schema.Builder schema = Schema.newBuilder().primaryKey(KEY).options(PK_OPTIONS);
            PK_ROW.getFields().forEach(field -> schema.column(field.name(), field.type()));
            catalog.createTable(Identifier.create(DATABASE, PK_TABLE), schema.build(), false);
            return commit(pkTable(catalog), rows, threads);
        }
    }

    private static ObjectNode upsertOnce(Path warehouse, List<InternalRow> rows, int threads) throws Exception {
        try (Catalog catalog = catalog(warehouse)) {
            return commit(pkTable(catalog), rows, threads);
        }
    }

    /** One batch commit of {@code rows} by {@code threads} writers (see the file's comment); the
     * check is the rows the new snapshot added. */
    private static ObjectNode commit(FileStoreTable table, List<InternalRow> rows, int threads) throws Exception {
        Path spill = Files.createTempDirectory("paimon-bench-spill");
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try (IOManager io = IOManager.create(spill.toString())) {
            BatchWriteBuilder builder = table.newBatchWriteBuilder();
            List<BatchTableWrite> writes = new ArrayList<>();
            try (BatchTableCommit commit = builder.newCommit()) {
                for (int i = 0; i < threads; i++) {
                    BatchTableWrite write = builder.newWrite();
                    write.withIOManager(io);
                    writes.add(write);
                }
                if (threads == 1) {
                    for (InternalRow row : rows) {
                        writes.get(0).write(row);
                    }
                    commit.commit(writes.get(0).prepareCommit());
                } else {
                    int[] buckets = new int[rows.size()];
                    int slice = (rows.size() + threads - 1) / threads;
                    runAll(pool, threads, index -> {
                        BatchTableWrite write = writes.get(index);
                        for (int r = index * slice; r < Math.min(rows.size(), (index + 1) * slice); r++) {
                            buckets[r] = write.getBucket(rows.get(r));
                        }
                        return null;
                    });
                    List<List<CommitMessage>> messages = runAll(pool, threads, index -> {
                        BatchTableWrite write = writes.get(index);
                        for (int r = 0; r < buckets.length; r++) {
                            if (buckets[r] % threads == index) {
                                write.write(rows.get(r), buckets[r]);
                            }
                        }
                        return write.prepareCommit();
                    });
                    List<CommitMessage> all = new ArrayList<>();
                    messages.forEach(all::addAll);
                    commit.commit(all);
                }
            } finally {
                for (BatchTableWrite write : writes) {
                    write.close();
                }
            }
        } finally {
            pool.shutdownNow();
            deleteTree(spill);
        }
        Snapshot latest = table.snapshotManager().latestSnapshot();
        ObjectNode check = JSON.createObjectNode();
        check.put("rows", latest == null ? 0 : latest.deltaRecordCount());
        return check;
    }

    /** A task per thread index, run on {@code pool}; their results in index order (the first failure is thrown). */
    private static <T> List<T> runAll(ExecutorService pool, int threads, IndexedTask<T> task) throws Exception {
        List<Future<T>> futures = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            int index = i;
            futures.add(pool.submit((Callable<T>) () -> task.run(index)));
        }
        List<T> results = new ArrayList<>();
        for (Future<T> future : futures) {
            results.add(future.get());
        }
        return results;
    }

    /** The work of one thread of {@link #runAll}. */
    private interface IndexedTask<T> {
        T run(int index) throws Exception;
    }

    /** Plans and reads the merged table (or its key range) row by row, the plan's splits on
     * {@code --threads} threads; the fingerprint of what it returned. */
    private static ObjectNode readOnce(FileStoreTable table, Args args) throws Exception {
        ReadBuilder builder = table.newReadBuilder();
        if (args.ranged) {
            PredicateBuilder predicates = new PredicateBuilder(table.rowType());
            Predicate range = PredicateBuilder.and(predicates.greaterOrEqual(0, args.low),
                    predicates.lessThan(0, args.high));
            builder = builder.withFilter(range);
        }
        List<Split> splits = builder.newScan().plan().splits();
        ReadBuilder planned = builder;
        ExecutorService pool = Executors.newFixedThreadPool(args.threads);
        List<long[]> sums;
        try {
            sums = runAll(pool, args.threads, index -> {
                TableRead read = planned.newRead();
                long[] sum = new long[4];
                for (int s = index; s < splits.size(); s += args.threads) {
                    try (RecordReader<InternalRow> reader = read.createReader(splits.get(s))) {
                        fingerprint(reader, args, sum);
                    }
                }
                return sum;
            });
        } finally {
            pool.shutdownNow();
        }
        long[] total = new long[4];
        for (long[] sum : sums) {
            for (int i = 0; i < total.length; i++) {
                total[i] += sum[i];
            }
        }
        ObjectNode check = JSON.createObjectNode();
        check.put("rows", total[0]);
        check.put("sum_id", total[1]);
        check.put("sum_v_int", total[2]);
        check.put("sum_v_i32", total[3]);
        return check;
    }

    /** Adds every row of {@code reader} to {@code sum}: rows, sum(id), sum(v_int), sum(v_i32). */
    private static void fingerprint(RecordReader<InternalRow> reader, Args args, long[] sum) throws IOException {
        RecordReader.RecordIterator<InternalRow> batch;
        while ((batch = reader.readBatch()) != null) {
            InternalRow row;
            while ((row = batch.next()) != null) {
                long id = row.getLong(0);
                if (args.ranged && (id < args.low || id >= args.high)) {
                    continue;  // the filter prunes files and row groups; the rest is the reader's caller's
                }
                sum[0]++;
                sum[1] += id;
                sum[2] += row.isNullAt(1) ? 0 : row.getLong(1);
                sum[3] += row.isNullAt(5) ? 0 : row.getInt(5);
            }
            batch.releaseBatch();
        }
    }

    // ---- measurement ----------------------------------------------------------------------------

    /** Runs the action once, timed: wall and process CPU seconds, peak RSS (VmHWM) before and after. */
    private static ObjectNode measure(Action action) throws Exception {
        double base = peakRssMib();
        double cpu = cpuSeconds();
        long start = System.nanoTime();
        ObjectNode check = action.run();
        double seconds = (System.nanoTime() - start) / 1e9;
        ObjectNode result = JSON.createObjectNode();
        result.put("seconds", Math.round(seconds * 1e4) / 1e4);
        result.put("cpu_seconds", Math.round((cpuSeconds() - cpu) * 1e3) / 1e3);
        result.put("base_rss_mib", base);
        result.put("peak_rss_mib", peakRssMib());
        result.set("check", check);
        return result;
    }

    private static double cpuSeconds() {
        OperatingSystemMXBean os = (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        return os.getProcessCpuTime() / 1e9;
    }

    private static double peakRssMib() throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (line.startsWith("VmHWM:")) {
                return Math.round(Long.parseLong(line.replaceAll("[^0-9]", "")) / 102.4) / 10.0;
            }
        }
        return 0.0;
    }

    // ---- tables and files -----------------------------------------------------------------------

    private static Catalog catalog(Path warehouse) {
        Options options = new Options();
        options.set("warehouse", warehouse.toAbsolutePath().toString());
        return CatalogFactory.createCatalog(CatalogContext.create(options));
    }

    private static FileStoreTable pkTable(Catalog catalog) throws Exception {
        return (FileStoreTable) catalog.getTable(Identifier.create(DATABASE, PK_TABLE));
    }

    /** The rows of an Arrow IPC file (all batches, or only batch {@code only}) as BinaryRows. */
    private static List<InternalRow> arrowRows(Path path, int only) throws Exception {
        List<InternalRow> out = new ArrayList<>();
        InternalRowSerializer serializer = new InternalRowSerializer(PK_ROW);
        try (BufferAllocator allocator = new RootAllocator();
                FileInputStream in = new FileInputStream(path.toFile());
                ArrowFileReader reader = new ArrowFileReader(in.getChannel(), allocator)) {
            ArrowBatchReader batches = new ArrowBatchReader(PK_ROW);
            int blocks = reader.getRecordBlocks().size();
            for (int index = 0; index < blocks; index++) {
                if (only >= 0 && index != only) {
                    continue;
                }
                reader.loadRecordBatch(reader.getRecordBlocks().get(index));
                for (InternalRow row : batches.readBatch(reader.getVectorSchemaRoot())) {
                    out.add(serializer.toBinaryRow(row).copy());
                }
            }
            if (only >= blocks) {
                throw new IllegalArgumentException(path + " has " + blocks + " batches, not " + (only + 1));
            }
        }
        return out;
    }

    private static Path scratch(Path target, int index) {
        return target.resolveSibling(target.getFileName() + "-warm-" + index);
    }

    private static void copyTree(Path from, Path to) throws IOException {
        try (Stream<Path> paths = Files.walk(from)) {
            for (Path path : (Iterable<Path>) paths::iterator) {
                Path copy = to.resolve(from.relativize(path).toString());
                if (Files.isDirectory(path)) {
                    Files.createDirectories(copy);
                } else {
                    Files.copy(path, copy, StandardCopyOption.COPY_ATTRIBUTES);
                }
            }
        }
    }

    private static void deleteTree(Path root) throws IOException {
        if (!Files.exists(root)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(root)) {
            for (Path path : (Iterable<Path>) paths.sorted(Comparator.reverseOrder())::iterator) {
                Files.delete(path);
            }
        }
    }
}
