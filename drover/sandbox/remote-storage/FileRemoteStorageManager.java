package dev.drover.sandbox;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Comparator;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;

import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.server.log.remote.storage.LogSegmentData;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;

/**
 * The Drover sandbox's remote storage for tiered topics (KIP-405): each uploaded segment, with its indexes, in a
 * folder of the machine, {@code <dir>/<topic>-<partition>-<topic id>/<segment id>/}. The folder is
 * {@code rsm.config.dir}. A segment's files are written under a temporary name and renamed once complete, so a
 * reader never sees half a segment.
 */
public final class FileRemoteStorageManager implements RemoteStorageManager {
    private Path root;

    @Override
    public void configure(Map<String, ?> configs) {
        Object dir = configs.get("dir");
        if (dir == null) {
            throw new IllegalArgumentException("FileRemoteStorageManager needs its folder: rsm.config.dir");
        }
        root = Paths.get(dir.toString());
        try {
            Files.createDirectories(root);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private Path folder(RemoteLogSegmentMetadata segment) {
        TopicIdPartition tp = segment.remoteLogSegmentId().topicIdPartition();
        return root.resolve(tp.topic() + "-" + tp.partition() + "-" + tp.topicId())
            .resolve(segment.remoteLogSegmentId().id().toString());
    }

    @Override
    public Optional<RemoteLogSegmentMetadata.CustomMetadata> copyLogSegmentData(
            RemoteLogSegmentMetadata segment, LogSegmentData data) throws RemoteStorageException {
        Path done = folder(segment);
        Path partial = done.resolveSibling(done.getFileName() + ".partial");
        try {
            delete(partial);
            Files.createDirectories(partial);
            Files.copy(data.logSegment(), partial.resolve("segment"));
            Files.copy(data.offsetIndex(), partial.resolve("offset"));
            Files.copy(data.timeIndex(), partial.resolve("timestamp"));
            if (data.transactionIndex().isPresent()) {
                Files.copy(data.transactionIndex().get(), partial.resolve("transaction"));
            }
            Files.copy(data.producerSnapshotIndex(), partial.resolve("producer_snapshot"));
            ByteBuffer epochs = data.leaderEpochIndex().duplicate();
            try (OutputStream out = Files.newOutputStream(partial.resolve("leader_epoch"))) {
                byte[] bytes = new byte[epochs.remaining()];
                epochs.get(bytes);
                out.write(bytes);
            }
            delete(done);
            Files.move(partial, done, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new RemoteStorageException("could not copy " + segment.remoteLogSegmentId() + " to " + done, e);
        }
        return Optional.empty();
    }

    @Override
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata segment, int startPosition)
            throws RemoteStorageException {
        return fetchLogSegment(segment, startPosition, Integer.MAX_VALUE);
    }

    @Override
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata segment, int startPosition, int endPosition)
            throws RemoteStorageException {
        Path file = folder(segment).resolve("segment");
        try {
            FileChannel channel = FileChannel.open(file, StandardOpenOption.READ);
            long last = Math.min((long) endPosition, channel.size() - 1);  // endPosition is inclusive
            channel.position(startPosition);
            return new Range(Channels.newInputStream(channel), Math.max(0, last - startPosition + 1));
        } catch (NoSuchFileException e) {
            throw new RemoteResourceNotFoundException("no remote segment " + segment.remoteLogSegmentId());
        } catch (IOException e) {
            throw new RemoteStorageException("could not read " + file, e);
        }
    }

    @Override
    public InputStream fetchIndex(RemoteLogSegmentMetadata segment, IndexType type) throws RemoteStorageException {
        String name;
        switch (type) {
            case OFFSET: name = "offset"; break;
            case TIMESTAMP: name = "timestamp"; break;
            case PRODUCER_SNAPSHOT: name = "producer_snapshot"; break;
            case TRANSACTION: name = "transaction"; break;
            default: name = "leader_epoch"; break;
        }
        Path file = folder(segment).resolve(name);
        try {
            return Files.newInputStream(file);
        } catch (NoSuchFileException e) {
            throw new RemoteResourceNotFoundException("no " + name + " index for " + segment.remoteLogSegmentId());
        } catch (IOException e) {
            throw new RemoteStorageException("could not read " + file, e);
        }
    }

    @Override
    public void deleteLogSegmentData(RemoteLogSegmentMetadata segment) throws RemoteStorageException {
        try {
            delete(folder(segment));
        } catch (IOException e) {
            throw new RemoteStorageException("could not delete " + segment.remoteLogSegmentId(), e);
        }
    }

    @Override
    public void close() {
    }

    private static void delete(Path folder) throws IOException {
        if (!Files.exists(folder)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(folder)) {
            for (Path path : (Iterable<Path>) paths.sorted(Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(path);
            }
        }
    }

    /** At most {@code left} bytes of a stream. */
    private static final class Range extends InputStream {
        private final InputStream in;
        private long left;

        Range(InputStream in, long left) {
            this.in = in;
            this.left = left;
        }

        @Override
        public int read() throws IOException {
            if (left <= 0) {
                return -1;
            }
            int b = in.read();
            if (b >= 0) {
                left--;
            }
            return b;
        }

        @Override
        public int read(byte[] buffer, int offset, int length) throws IOException {
            if (left <= 0) {
                return -1;
            }
            int n = in.read(buffer, offset, (int) Math.min(length, left));
            if (n > 0) {
                left -= n;
            }
            return n;
        }

        @Override
        public void close() throws IOException {
            in.close();
        }
    }
}
