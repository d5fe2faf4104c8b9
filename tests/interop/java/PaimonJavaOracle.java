/*
 * The Java oracle: performs the steps of a JSON spec with Apache Paimon's own Java core.
 *
 * Usage: java -cp <paimon + hadoop jars>:<classes> PaimonJavaOracle SPEC.json RESULT.json
 *    or: ... PaimonJavaOracle --serve   (spec and result paths per line on stdin, see serve())
 *
 * Tables travel as Arrow IPC files (Paimon's own paimon-arrow converters on this side, pyarrow
 * on the other), so every Paimon type crosses without a hand-written codec. Steps mirror the
 * pypaimon driver (tests/interop/oracle_driver.py): create_database, create_table, write,
 * compact, alter, create_tag, expire, rollback, read, changes, files, bucket_check, buckets_of,
 * system_table.
 * Writes marked "stream" go through one long-lived StreamTableWrite per table, as a Flink job's
 * writer does, so its in-memory LSM state, compactions and commit identifiers carry on between
 * steps of one run.
 */

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.TimeStampVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileReader;
import org.apache.arrow.vector.ipc.ArrowFileWriter;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.paimon.append.UnawareAppendCompactionTask;
import org.apache.paimon.append.UnawareAppendTableCompactionCoordinator;
import org.apache.paimon.arrow.reader.ArrowBatchReader;
import org.apache.paimon.arrow.vector.ArrowFormatWriter;
import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.BinaryRow;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.data.JoinedRow;
import org.apache.paimon.data.Timestamp;
import org.apache.paimon.data.serializer.InternalRowSerializer;
import org.apache.paimon.disk.IOManager;
import org.apache.paimon.index.BucketAssigner;
import org.apache.paimon.index.HashBucketAssigner;
import org.apache.paimon.index.SimpleHashBucketAssigner;
import org.apache.paimon.io.DataFileMeta;
import org.apache.paimon.options.ExpireConfig;
import org.apache.paimon.options.Options;
import org.apache.paimon.predicate.Predicate;
import org.apache.paimon.predicate.PredicateBuilder;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.schema.Schema;
import org.apache.paimon.schema.SchemaChange;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.paimon.operation.AppendOnlyFileStoreWrite;
import org.apache.paimon.table.BucketMode;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.Table;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.CommitMessage;
import org.apache.paimon.table.sink.DynamicBucketRowKeyExtractor;
import org.apache.paimon.table.sink.RowKeyExtractor;
import org.apache.paimon.table.sink.StreamTableCommit;
import org.apache.paimon.table.sink.StreamTableWrite;
import org.apache.paimon.table.sink.StreamWriteBuilder;
import org.apache.paimon.table.sink.TableWrite;
import org.apache.paimon.table.source.DataSplit;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.table.source.SnapshotNotExistPlan;
import org.apache.paimon.table.source.Split;
import org.apache.paimon.table.source.StreamTableScan;
import org.apache.paimon.table.source.TableScan;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DataTypeChecks;
import org.apache.paimon.types.DataTypeJsonParser;
import org.apache.paimon.types.DataTypeRoot;
import org.apache.paimon.types.DataTypes;
import org.apache.paimon.types.RowKind;
import org.apache.paimon.types.RowType;
import org.apache.paimon.utils.InternalRowPartitionComputer;

import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

public final class PaimonJavaOracle {

    /** Column of input and change files holding each row's kind (+I, -U, +U, -D). */
    private static final String ROW_KIND = "_row_kind";

    private static final ObjectMapper JSON = new ObjectMapper();

    private final Catalog catalog;
    private final IOManager ioManager;
    private final Map<String, StreamState> streams = new HashMap<>();

    /** One long-lived streaming writer of a table and its next commit identifier. */
    private static final class StreamState {
        final StreamWriteBuilder builder;
        final StreamTableWrite write;
        final StreamTableCommit commit;
        long nextIdentifier = 1;

        StreamState(Table table, IOManager ioManager) {
            builder = table.newStreamWriteBuilder();
            write = builder.newWrite();
            write.withIOManager(ioManager);
            commit = builder.newCommit();
        }

        void commit(boolean waitCompaction) throws Exception {
            long id = nextIdentifier++;
            commit.commit(id, write.prepareCommit(waitCompaction, id));
        }

        void close() throws Exception {
            write.close();
            commit.close();
        }
    }

    private PaimonJavaOracle(Catalog catalog, String tmpDir) {
        this.catalog = catalog;
        this.ioManager = IOManager.create(tmpDir);
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("--serve")) {
            serve();
        } else {
            runSpec(new File(args[0]), new File(args[1]));
        }
    }

    /**
     * Serve step lists until stdin closes: each line is "SPEC.json<TAB>RESULT.json", answered by a
     * line "ok" or "error" (the stack trace then in RESULT.json.error). One JVM then loads Paimon
     * and Hadoop once for a whole test session instead of once per step list; every spec still
     * gets its own catalog, writers and spill directory, as a separate run would.
     */
    private static void serve() throws Exception {
        java.io.BufferedReader in = new java.io.BufferedReader(
                new java.io.InputStreamReader(System.in, java.nio.charset.StandardCharsets.UTF_8));
        java.io.PrintStream answers = System.out;
        System.setOut(System.err);  // whatever Paimon or Hadoop print stays off the answer channel
        String line;
        while ((line = in.readLine()) != null) {
            String[] files = line.split("\t");
            String answer = "ok";
            try {
                runSpec(new File(files[0]), new File(files[1]));
            } catch (Throwable t) {  // reported to the caller; the next spec gets a clean run
                java.io.StringWriter trace = new java.io.StringWriter();
                t.printStackTrace(new java.io.PrintWriter(trace));
                Files.writeString(new File(files[1] + ".error").toPath(), trace.toString());
                answer = "error";
            }
            answers.println(answer);
            answers.flush();
        }
    }

    private static void runSpec(File specFile, File resultFile) throws Exception {
        JsonNode spec = JSON.readTree(specFile);
        Options options = new Options();
        options.set("warehouse", spec.get("warehouse").asText());
        spec.path("catalog_options").fields().forEachRemaining(e -> options.set(e.getKey(), e.getValue().asText()));
        String tmp = Files.createTempDirectory("paimon-java-oracle").toString();
        ArrayNode results = JSON.createArrayNode();
        try (Catalog catalog = CatalogFactory.createCatalog(CatalogContext.create(options))) {
            PaimonJavaOracle oracle = new PaimonJavaOracle(catalog, tmp);
            try {
                for (JsonNode step : spec.get("steps")) {
                    results.add(oracle.run(step));
                }
            } finally {
                oracle.closeStreams();
                oracle.closeIoManager(new File(tmp));
            }
        }
        JSON.writeValue(resultFile, results);
    }

    /** Closes the spill/lookup directories; files a closing writer still holds are removed after it. */
    private void closeIoManager(File tmp) throws Exception {
        try {
            ioManager.close();
        } catch (java.io.UncheckedIOException e) {
            // a lookup level's files may still be open in a compaction thread that is shutting down
        }
        try (var paths = Files.walk(tmp.toPath())) {
            paths.sorted(java.util.Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
        }
    }

    private void closeStreams() throws Exception {
        for (StreamState state : streams.values()) {
            state.close();
        }
        streams.clear();
    }

    private JsonNode run(JsonNode step) throws Exception {
        String op = step.get("op").asText();
        switch (op) {
            case "create_database":
                catalog.createDatabase(step.get("name").asText(), true);
                return null;
            case "create_table":
                createTable(step);
                return null;
            case "write":
                write(step);
                return null;
            case "compact":
                compact(step);
                return null;
            case "alter":
                alter(step);
                return null;
            case "create_tag":
                FileStoreTable tagged = table(step);
                long tagSnapshot = step.hasNonNull("snapshot_id")
                        ? step.get("snapshot_id").asLong() : tagged.snapshotManager().latestSnapshotId();
                tagged.createTag(step.get("name").asText(), tagSnapshot);
                return null;
            case "expire":
                return JSON.getNodeFactory().numberNode(expire(step));
            case "rollback":
                table(step).rollbackTo(step.get("snapshot_id").asLong());
                return null;
            case "read":
                return read(step);
            case "changes":
                return changes(step);
            case "files":
                return files(step);
            case "bucket_check":
                return bucketCheck(step);
            case "buckets_of":
                return bucketsOf(step);
            case "system_table":
                return systemTable(step);
            case "mark_done":
                markDone(step);
                return null;
            case "success_file":
                return successFile(step);
            default:
                throw new IllegalArgumentException("unknown step " + op);
        }
    }

    /** Paimon's mark_partition_done with the success-file action, for each partition spec given. */
    private void markDone(JsonNode step) throws Exception {
        FileStoreTable table = table(step);
        List<Map<String, String>> partitions = new ArrayList<>();
        step.get("partitions").forEach(p -> partitions.add(stringMap(p)));
        try (org.apache.paimon.partition.actions.SuccessFileMarkDoneAction action =
                new org.apache.paimon.partition.actions.SuccessFileMarkDoneAction(table.fileIO(), table.location())) {
            for (String path : org.apache.paimon.utils.PartitionPathUtils.generatePartitionPaths(
                    partitions, table.schema().logicalPartitionType())) {
                action.markDone(path);
            }
        }
    }

    /** A partition's _SUCCESS file as Java reads it, or null. */
    private JsonNode successFile(JsonNode step) throws Exception {
        FileStoreTable table = table(step);
        LinkedHashMap<String, String> spec = new LinkedHashMap<>(stringMap(step.get("partition")));
        org.apache.paimon.fs.Path path = new org.apache.paimon.fs.Path(
                new org.apache.paimon.fs.Path(table.location(),
                        org.apache.paimon.utils.PartitionPathUtils.generatePartitionPath(spec)),
                org.apache.paimon.partition.actions.SuccessFileMarkDoneAction.SUCCESS_FILE_NAME);
        org.apache.paimon.partition.file.SuccessFile file =
                org.apache.paimon.partition.file.SuccessFile.safelyFromPath(table.fileIO(), path);
        if (file == null) {
            return null;
        }
        ObjectNode out = JSON.createObjectNode();
        out.put("creationTime", file.creationTime());
        out.put("modificationTime", file.modificationTime());
        return out;
    }

    private FileStoreTable table(JsonNode step) throws Exception {
        return (FileStoreTable) catalog.getTable(Identifier.fromString(step.get("table").asText()));
    }

    private static List<String> strings(JsonNode node) {
        List<String> out = new ArrayList<>();
        if (node != null) {
            node.forEach(n -> out.add(n.asText()));
        }
        return out;
    }

    private static Map<String, String> stringMap(JsonNode node) {
        Map<String, String> out = new LinkedHashMap<>();
        if (node != null) {
            node.fields().forEachRemaining(e -> out.put(e.getKey(), e.getValue().asText()));
        }
        return out;
    }

    // ---------------------------------------------------------------------------------------
    // DDL
    // ---------------------------------------------------------------------------------------

    private void createTable(JsonNode step) throws Exception {
        Schema.Builder builder = Schema.newBuilder();
        for (JsonNode field : step.get("fields")) {
            builder.column(field.get("name").asText(), DataTypeJsonParser.parseDataType(field.get("type")));
        }
        builder.primaryKey(strings(step.get("primary_keys")));
        builder.partitionKeys(strings(step.get("partition_keys")));
        builder.options(stringMap(step.get("options")));
        catalog.createTable(Identifier.fromString(step.get("table").asText()), builder.build(), false);
    }

    private void alter(JsonNode step) throws Exception {
        List<SchemaChange> changes = new ArrayList<>();
        for (JsonNode change : step.get("changes")) {
            String op = change.get("op").asText();
            String name = change.path("name").asText();
            switch (op) {
                case "add_column":
                    changes.add(SchemaChange.addColumn(name, DataTypeJsonParser.parseDataType(change.get("type"))));
                    break;
                case "rename_column":
                    changes.add(SchemaChange.renameColumn(name, change.get("new_name").asText()));
                    break;
                case "drop_column":
                    changes.add(SchemaChange.dropColumn(name));
                    break;
                case "update_column_type":
                    changes.add(SchemaChange.updateColumnType(name, DataTypeJsonParser.parseDataType(change.get("type"))));
                    break;
                case "set_option":
                    changes.add(SchemaChange.setOption(change.get("key").asText(), change.get("value").asText()));
                    break;
                case "remove_option":
                    changes.add(SchemaChange.removeOption(change.get("key").asText()));
                    break;
                default:
                    throw new IllegalArgumentException("unknown change " + op);
            }
        }
        catalog.alterTable(Identifier.fromString(step.get("table").asText()), changes, false);
    }

    // ---------------------------------------------------------------------------------------
    // Writes
    // ---------------------------------------------------------------------------------------

    private StreamState stream(String name, FileStoreTable table) {
        return streams.computeIfAbsent(name, n -> new StreamState(table, ioManager));
    }

    private void write(JsonNode step) throws Exception {
        FileStoreTable table = table(step);
        String name = step.get("table").asText();
        if (step.path("stream").asBoolean(false)) {
            StreamState state = stream(name, table);
            writeRows(table, state.write, step.get("data").asText(), false);
            state.commit(step.path("wait_compaction").asBoolean(false));
            return;
        }
        BatchWriteBuilder builder = table.newBatchWriteBuilder();
        if (step.hasNonNull("overwrite")) {
            builder = builder.withOverwrite(stringMap(step.get("overwrite")));
        }
        try (BatchTableWrite write = builder.newWrite(); BatchTableCommit commit = builder.newCommit()) {
            write.withIOManager(ioManager);
            writeRows(table, write, step.get("data").asText(), step.hasNonNull("overwrite"));
            commit.commit(write.prepareCommit());
        }
    }

    /**
     * Writes the rows of an Arrow IPC file; a {@code _row_kind} column sets each row's kind. Rows of
     * dynamic-bucket tables get their bucket from Java's HashBucketAssigner over the table's HASH
     * index, as Flink's assigner operator does ({@code overwrite}: a fresh assignment).
     */
    private static void writeRows(FileStoreTable table, TableWrite write, String path, boolean overwrite)
            throws Exception {
        BucketAssigner assigner = null;
        DynamicBucketRowKeyExtractor keys = null;
        if (table.bucketMode() == BucketMode.HASH_DYNAMIC) {
            long target = table.coreOptions().dynamicBucketTargetRowNum();
            assigner = overwrite ? new SimpleHashBucketAssigner(1, 0, target)
                    : new HashBucketAssigner(table.snapshotManager(), "java-oracle",
                            table.store().newIndexFileHandler(), 1, 1, 0, target);
            keys = new DynamicBucketRowKeyExtractor(table.schema());
        }
        for (Iterator<InternalRow> rows = arrowRows(table.rowType(), path); rows.hasNext(); ) {
            InternalRow row = rows.next();
            if (assigner == null) {
                write.write(row);
            } else {
                keys.setRecord(row);
                write.write(row, assigner.assign(keys.partition().copy(), keys.trimmedPrimaryKey().hashCode()));
            }
        }
    }

    /** The rows of an Arrow IPC file as Paimon rows of {@code rowType}, each with its kind set. */
    private static Iterator<InternalRow> arrowRows(RowType rowType, String path) throws Exception {
        List<InternalRow> out = new ArrayList<>();
        try (BufferAllocator allocator = new RootAllocator();
                FileInputStream in = new FileInputStream(path);
                ArrowFileReader reader = new ArrowFileReader(in.getChannel(), allocator)) {
            ArrowBatchReader batches = new ArrowBatchReader(rowType);
            InternalRowSerializer serializer = new InternalRowSerializer(rowType);
            List<Integer> nanos = new ArrayList<>();
            for (int i = 0; i < rowType.getFieldCount(); i++) {
                DataType type = rowType.getTypeAt(i);
                boolean timestamp = type.getTypeRoot() == DataTypeRoot.TIMESTAMP_WITHOUT_TIME_ZONE
                        || type.getTypeRoot() == DataTypeRoot.TIMESTAMP_WITH_LOCAL_TIME_ZONE;
                if (timestamp && DataTypeChecks.getPrecision(type) > 6) {
                    nanos.add(i);
                }
            }
            InternalRow.FieldGetter[] getters = new InternalRow.FieldGetter[rowType.getFieldCount()];
            for (int i = 0; i < getters.length; i++) {
                getters[i] = InternalRow.createFieldGetter(rowType.getTypeAt(i), i);
            }
            while (reader.loadNextBatch()) {
                VectorSchemaRoot root = reader.getVectorSchemaRoot();
                FieldVector kinds = findVector(root, ROW_KIND);
                int position = 0;
                for (InternalRow row : batches.readBatch(root)) {
                    InternalRow copy = nanos.isEmpty() ? serializer.copy(row)
                            : withNanos(row, getters, nanos, root, rowType, position);
                    if (kinds != null) {
                        String kind = new String(((VarCharVector) kinds).get(position), "UTF-8");
                        copy.setRowKind(RowKind.fromShortString(kind));
                    } else {
                        copy.setRowKind(RowKind.INSERT);
                    }
                    out.add(copy);
                    position++;
                }
            }
        }
        return out.iterator();
    }

    /**
     * The row with its nanosecond timestamps taken from the Arrow vectors directly: Paimon 0.9's
     * Arrow2PaimonVectorConverter computes the nanos of millisecond as {@code (int) value % 1_000_000},
     * which overflows (and fails) for most TIMESTAMP(7..9) values.
     */
    private static InternalRow withNanos(InternalRow row, InternalRow.FieldGetter[] getters, List<Integer> nanos,
            VectorSchemaRoot root, RowType rowType, int position) {
        GenericRow copy = new GenericRow(getters.length);
        for (int i = 0; i < getters.length; i++) {
            if (!nanos.contains(i)) {
                copy.setField(i, getters[i].getFieldOrNull(row));
            }
        }
        for (int i : nanos) {
            TimeStampVector vector = (TimeStampVector) findVector(root, rowType.getFieldNames().get(i));
            if (!vector.isNull(position)) {
                long value = vector.get(position);
                copy.setField(i, Timestamp.fromEpochMillis(
                        Math.floorDiv(value, 1_000_000L), (int) Math.floorMod(value, 1_000_000L)));
            }
        }
        return copy;
    }

    private static FieldVector findVector(VectorSchemaRoot root, String name) {
        for (Field field : root.getSchema().getFields()) {
            if (field.getName().equals(name)) {
                return root.getVector(name);
            }
        }
        return null;
    }

    /**
     * Compacts every bucket holding files (all levels), in the stream writer or a batch write;
     * unaware-bucket append tables through Java's compaction coordinator and tasks. A write-only
     * table is compacted as its dedicated compaction job would, with write-only off.
     */
    private void compact(JsonNode step) throws Exception {
        FileStoreTable table = table(step).copy(Map.of("write-only", "false"));
        boolean full = step.path("full").asBoolean(true);
        if (table.bucketMode() == BucketMode.BUCKET_UNAWARE) {
            List<CommitMessage> messages = new ArrayList<>();
            AppendOnlyFileStoreWrite write = (AppendOnlyFileStoreWrite) table.store().newWrite("java-oracle");
            for (UnawareAppendCompactionTask task : new UnawareAppendTableCompactionCoordinator(table, false).run()) {
                messages.add(task.doCompact(table, write));
            }
            write.close();
            try (BatchTableCommit commit = table.newBatchWriteBuilder().newCommit()) {
                commit.commit(messages);
            }
            return;
        }
        Map<String, Map.Entry<BinaryRow, Integer>> buckets = new TreeMap<>();
        for (DataSplit split : table.newSnapshotReader().read().dataSplits()) {
            buckets.put(split.partition().toString() + "/" + split.bucket(), Map.entry(split.partition(), split.bucket()));
        }
        if (step.path("stream").asBoolean(false)) {
            StreamState state = stream(step.get("table").asText(), table);
            for (Map.Entry<BinaryRow, Integer> bucket : buckets.values()) {
                state.write.compact(bucket.getKey(), bucket.getValue(), full);
            }
            state.commit(true);
            return;
        }
        BatchWriteBuilder builder = table.newBatchWriteBuilder();
        try (BatchTableWrite write = builder.newWrite(); BatchTableCommit commit = builder.newCommit()) {
            write.withIOManager(ioManager);
            for (Map.Entry<BinaryRow, Integer> bucket : buckets.values()) {
                write.compact(bucket.getKey(), bucket.getValue(), full);
            }
            commit.commit(write.prepareCommit());
        }
    }

    private int expire(JsonNode step) throws Exception {
        ExpireConfig.Builder config = ExpireConfig.builder()
                .snapshotRetainMin(step.path("retain_min").asInt(1))
                .snapshotRetainMax(step.path("retain_max").asInt(Integer.MAX_VALUE))
                .snapshotTimeRetain(Duration.ofMillis(step.path("time_retained_ms").asLong(0)))
                .snapshotMaxDeletes(Integer.MAX_VALUE);
        if (step.hasNonNull("changelog_retain_max")) {
            config.changelogRetainMax(step.get("changelog_retain_max").asInt())
                    .changelogRetainMin(step.path("changelog_retain_min").asInt(1))
                    .changelogTimeRetain(Duration.ofMillis(step.path("changelog_time_retained_ms").asLong(0)));
        }
        return table(step).newExpireSnapshots().config(config.build()).expire();
    }

    // ---------------------------------------------------------------------------------------
    // Reads
    // ---------------------------------------------------------------------------------------

    private FileStoreTable timeTravel(JsonNode step) throws Exception {
        Map<String, String> options = stringMap(step.get("options"));
        if (step.hasNonNull("snapshot_id")) {
            options.put("scan.snapshot-id", step.get("snapshot_id").asText());
        }
        if (step.hasNonNull("tag")) {
            options.put("scan.tag-name", step.get("tag").asText());
        }
        FileStoreTable table = table(step);
        return options.isEmpty() ? table : table.copy(options);
    }

    private static ReadBuilder readBuilder(FileStoreTable table, JsonNode step) {
        ReadBuilder builder = table.newReadBuilder();
        if (step.hasNonNull("filter")) {
            builder = builder.withFilter(predicate(table.rowType(), step.get("filter")));
        }
        if (step.hasNonNull("columns")) {
            List<String> columns = strings(step.get("columns"));
            int[] projection = new int[columns.size()];
            for (int i = 0; i < projection.length; i++) {
                projection[i] = table.rowType().getFieldIndex(columns.get(i));
            }
            builder = builder.withProjection(projection);
        }
        return builder;
    }

    private ObjectNode read(JsonNode step) throws Exception {
        FileStoreTable table = timeTravel(step);
        ReadBuilder builder = readBuilder(table, step);
        List<Split> splits = builder.newScan().plan().splits();
        RowType type = builder.readType();
        List<InternalRow> rows = collect(builder, splits, type, false);
        if (step.hasNonNull("out")) {
            save(type, rows, step.get("out").asText());
        }
        int files = 0;
        for (Split split : splits) {
            files += ((DataSplit) split).dataFiles().size();
        }
        ObjectNode out = JSON.createObjectNode();
        out.put("rows", rows.size());
        out.put("files", files);
        out.put("splits", splits.size());
        return out;
    }

    /** Java's streaming read of the changes of each snapshot in [start, end] that has any. */
    private ArrayNode changes(JsonNode step) throws Exception {
        FileStoreTable table = timeTravel(step);
        ReadBuilder builder = readBuilder(table, step);
        StreamTableScan scan = builder.newStreamScan();
        scan.restore(step.get("start").asLong());
        long end = step.get("end").asLong();
        RowType type = withRowKind(builder.readType());
        ArrayNode ids = JSON.createArrayNode();
        while (true) {
            TableScan.Plan plan = scan.plan();
            if (plan instanceof SnapshotNotExistPlan) {
                break;
            }
            long snapshotId = scan.checkpoint() - 1;
            if (snapshotId > end) {
                break;
            }
            List<InternalRow> rows = collect(builder, plan.splits(), type, true);
            save(type, rows, step.get("out").asText() + "-" + ids.size());
            ids.add(snapshotId);
        }
        return ids;
    }

    private static RowType withRowKind(RowType type) {
        List<DataField> fields = new ArrayList<>(type.getFields());
        fields.add(new DataField(Integer.MAX_VALUE - 1, ROW_KIND, DataTypes.STRING()));
        return new RowType(fields);
    }

    /** The rows of splits, copied (readers reuse their row objects); with the kind appended if asked. */
    private static List<InternalRow> collect(ReadBuilder builder, List<Split> splits, RowType type, boolean withKind)
            throws Exception {
        int width = withKind ? type.getFieldCount() - 1 : type.getFieldCount();
        InternalRowSerializer serializer = new InternalRowSerializer(builder.readType());
        List<InternalRow> rows = new ArrayList<>();
        try (RecordReader<InternalRow> reader = builder.newRead().createReader(splits)) {
            reader.forEachRemaining(row -> {
                InternalRow copy = serializer.copy(row);
                if (withKind) {
                    GenericRow kind = GenericRow.of(BinaryString.fromString(row.getRowKind().shortString()));
                    rows.add(new JoinedRow(copy, kind));
                } else {
                    rows.add(copy);
                }
            });
        }
        if (width != builder.readType().getFieldCount()) {
            throw new IllegalStateException("row width mismatch");
        }
        return rows;
    }

    private static void save(RowType type, List<InternalRow> rows, String path) throws Exception {
        try (ArrowFormatWriter writer = new ArrowFormatWriter(type, Math.max(rows.size(), 1), true)) {
            for (InternalRow row : rows) {
                if (!writer.write(row)) {
                    throw new IllegalStateException("Arrow batch overflow writing " + path);
                }
            }
            writer.flush();
            VectorSchemaRoot root = writer.getVectorSchemaRoot();
            try (FileOutputStream out = new FileOutputStream(path);
                    ArrowFileWriter file = new ArrowFileWriter(root, null, out.getChannel())) {
                file.start();
                file.writeBatch();
                file.end();
            }
        }
    }

    /** The data files of a snapshot (all levels), as Java's snapshot reader plans them. */
    private ArrayNode files(JsonNode step) throws Exception {
        FileStoreTable table = table(step);
        ArrayNode out = JSON.createArrayNode();
        var reader = table.newSnapshotReader();
        if (step.hasNonNull("snapshot_id")) {
            reader = reader.withSnapshot(step.get("snapshot_id").asLong());
        }
        InternalRowPartitionComputer partitions = new InternalRowPartitionComputer(
                table.coreOptions().partitionDefaultName(), table.schema().logicalPartitionType(),
                table.partitionKeys().toArray(new String[0]));
        for (DataSplit split : reader.read().dataSplits()) {
            for (DataFileMeta file : split.dataFiles()) {
                ObjectNode node = out.addObject();
                node.put("partition", partitions.generatePartValues(split.partition()).toString());
                node.put("bucket", split.bucket());
                node.put("file", file.fileName());
                node.put("level", file.level());
                node.put("rows", file.rowCount());
                node.put("schema_id", file.schemaId());
            }
        }
        return out;
    }

    /**
     * A system table ("files" for db.t$files), read through the catalog as Paimon's SQL engines
     * read it (at "snapshot_id" through scan.snapshot-id when given), saved as Arrow to "out".
     */
    private ObjectNode systemTable(JsonNode step) throws Exception {
        String name = step.get("table").asText() + "$" + step.get("name").asText();
        Table table = catalog.getTable(Identifier.fromString(name));
        if (step.hasNonNull("snapshot_id")) {
            table = table.copy(Map.of("scan.snapshot-id", step.get("snapshot_id").asText()));
        }
        ReadBuilder builder = table.newReadBuilder();
        List<Split> splits = builder.newScan().plan().splits();
        RowType type = builder.readType();
        List<InternalRow> rows = collect(builder, splits, type, false);
        save(type, rows, step.get("out").asText());
        ObjectNode out = JSON.createObjectNode();
        out.put("rows", rows.size());
        return out;
    }

    /** Rows whose bucket (by Java's bucket function) is not the bucket their file lives in. */
    private ObjectNode bucketCheck(JsonNode step) throws Exception {
        FileStoreTable table = timeTravel(step);
        ReadBuilder builder = table.newReadBuilder();
        RowKeyExtractor extractor = table.createRowKeyExtractor();
        InternalRowSerializer serializer = new InternalRowSerializer(table.rowType());
        long checked = 0;
        long misplaced = 0;
        for (Split split : builder.newScan().plan().splits()) {
            int bucket = ((DataSplit) split).bucket();
            try (RecordReader<InternalRow> reader = builder.newRead().createReader(split)) {
                Iterator<InternalRow> rows = reader.toCloseableIterator();
                while (rows.hasNext()) {
                    extractor.setRecord(serializer.copy(rows.next()));
                    checked++;
                    if (extractor.bucket() != bucket) {
                        misplaced++;
                    }
                }
            }
        }
        ObjectNode out = JSON.createObjectNode();
        out.put("checked", checked);
        out.put("misplaced", misplaced);
        return out;
    }

    /** Java's bucket of each row of an Arrow IPC file (a fixed-bucket table's bucket function). */
    private ArrayNode bucketsOf(JsonNode step) throws Exception {
        FileStoreTable table = table(step);
        RowKeyExtractor extractor = table.createRowKeyExtractor();
        ArrayNode out = JSON.createArrayNode();
        for (Iterator<InternalRow> rows = arrowRows(table.rowType(), step.get("data").asText()); rows.hasNext(); ) {
            extractor.setRecord(rows.next());
            out.add(extractor.bucket());
        }
        return out;
    }

    // ---------------------------------------------------------------------------------------
    // Predicates
    // ---------------------------------------------------------------------------------------

    /** A conjunction of [column, op, value] terms; values are JSON, converted by the column's type. */
    private static Predicate predicate(RowType rowType, JsonNode terms) {
        PredicateBuilder builder = new PredicateBuilder(rowType);
        List<Predicate> made = new ArrayList<>();
        for (JsonNode term : terms) {
            int index = builder.indexOf(term.get(0).asText());
            DataType type = rowType.getTypeAt(index);
            String op = term.get(1).asText();
            JsonNode value = term.get(2);
            switch (op) {
                case "=": made.add(builder.equal(index, literal(type, value))); break;
                case "!=": made.add(builder.notEqual(index, literal(type, value))); break;
                case "<": made.add(builder.lessThan(index, literal(type, value))); break;
                case "<=": made.add(builder.lessOrEqual(index, literal(type, value))); break;
                case ">": made.add(builder.greaterThan(index, literal(type, value))); break;
                case ">=": made.add(builder.greaterOrEqual(index, literal(type, value))); break;
                case "is_null": made.add(builder.isNull(index)); break;
                case "is_not_null": made.add(builder.isNotNull(index)); break;
                case "in": {
                    List<Object> values = new ArrayList<>();
                    value.forEach(v -> values.add(literal(type, v)));
                    made.add(builder.in(index, values));
                    break;
                }
                default: throw new IllegalArgumentException("unknown filter op " + op);
            }
        }
        return PredicateBuilder.and(made);
    }

    private static Object literal(DataType type, JsonNode value) {
        if (value == null || value.isNull()) {
            return null;
        }
        Object java;
        switch (type.getTypeRoot()) {
            case TINYINT: java = (byte) value.asInt(); break;
            case SMALLINT: java = (short) value.asInt(); break;
            case INTEGER: java = value.asInt(); break;
            case BIGINT: java = value.asLong(); break;
            case FLOAT: java = (float) value.asDouble(); break;
            case DOUBLE: java = value.asDouble(); break;
            case BOOLEAN: java = value.asBoolean(); break;
            case DECIMAL: java = new BigDecimal(value.asText()); break;
            case DATE: java = LocalDate.parse(value.asText()); break;
            case TIME_WITHOUT_TIME_ZONE: java = LocalTime.parse(value.asText()); break;
            case TIMESTAMP_WITHOUT_TIME_ZONE: java = LocalDateTime.parse(value.asText()); break;
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE: java = Instant.parse(value.asText()); break;
            default: java = value.asText();
        }
        return PredicateBuilder.convertJavaObject(type, java);
    }
}
