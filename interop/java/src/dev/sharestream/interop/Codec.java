package dev.sharestream.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.message.RequestHeaderData;
import org.apache.kafka.common.message.ResponseHeaderData;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.MemoryRecordsBuilder;
import org.apache.kafka.common.record.internal.MutableRecordBatch;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.record.internal.SimpleRecord;

/**
 * Kafka's own codecs behind a line protocol, for the byte-equality test
 * (tests/suite/jvm_bytes.rs). One JVM serves the whole test: it reads one command
 * per line on stdin and answers one line on stdout, {@code ok ...} or
 * {@code err <message>}. Bytes travel as lowercase hex ({@code -} for null).
 *
 * <ul>
 * <li>{@code apis}: {@code ok key:lowest:highest ...} for every API the
 *     kafka-clients message classes know (unstable versions included).</li>
 * <li>{@code req <key> <version> <hex>}: the hex is a request header and
 *     body; both are read with kafka-clients' generated classes
 *     (RequestHeaderData and the API's *RequestData) at the header version
 *     Kafka uses for that API version, every byte must be consumed, and the
 *     answer is the re-encoding of both.</li>
 * <li>{@code resp <key> <version> <hex>}: the same for a response header and
 *     body.</li>
 * <li>{@code json req|resp <key> <version> <hex>}: the body (no header) read
 *     as above and rendered by the message's generated JsonConverter.</li>
 * <li>{@code batch <hex>}: record batches read with MemoryRecords, CRC
 *     checked; the answer is a canonical description (see
 *     {@link #describe}) and, for uncompressed batches, the batch rebuilt by
 *     MemoryRecordsBuilder from that description.</li>
 * <li>{@code build <description>}: one batch built by MemoryRecordsBuilder
 *     (any compression) from a description in the same format.</li>
 * </ul>
 */
public final class Codec {
    private Codec() {}

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            String answer;
            try {
                answer = "ok " + handle(line.trim().split(" "));
            } catch (Throwable t) {
                answer = "err " + t.getClass().getSimpleName() + ": "
                    + String.valueOf(t.getMessage()).replace('\n', ' ');
            }
            out.println(answer);
            out.flush();
        }
    }

    static String handle(String[] a) throws Exception {
        switch (a[0]) {
            case "apis": {
                StringBuilder sb = new StringBuilder();
                for (ApiMessageType t : ApiMessageType.values()) {
                    sb.append(t.apiKey()).append(':').append(t.lowestSupportedVersion())
                        .append(':').append(t.highestSupportedVersion(true)).append(' ');
                }
                return sb.toString().trim();
            }
            case "req":
            case "resp":
                return message(a[0].equals("req"), Short.parseShort(a[1]), Short.parseShort(a[2]),
                    a.length > 3 ? a[3] : "");
            case "json": {
                boolean request = a[1].equals("req");
                short key = Short.parseShort(a[2]);
                short version = Short.parseShort(a[3]);
                ApiMessageType t = ApiMessageType.fromApiKey(key);
                ApiMessage m = request ? t.newRequest() : t.newResponse();
                ByteBufferAccessor r = new ByteBufferAccessor(ByteBuffer.wrap(unhex(a.length > 4 ? a[4] : "")));
                m.read(r, version);
                Class<?> conv = Class.forName(m.getClass().getName() + "JsonConverter");
                Object node = conv.getMethod("write", m.getClass(), short.class).invoke(null, m, version);
                return node.toString();
            }
            case "batch":
                return batches(unhex(a.length > 1 ? a[1] : ""));
            case "build": {
                String[] spec = new String[a.length - 1];
                System.arraycopy(a, 1, spec, 0, spec.length);
                return hex(build(spec));
            }
            default:
                throw new IllegalArgumentException("unknown command " + a[0]);
        }
    }

    static String message(boolean request, short key, short version, String hexBytes) {
        ApiMessageType t = ApiMessageType.fromApiKey(key);
        ByteBufferAccessor r = new ByteBufferAccessor(ByteBuffer.wrap(unhex(hexBytes)));
        short hv = request ? t.requestHeaderVersion(version) : t.responseHeaderVersion(version);
        Message header = request ? new RequestHeaderData() : new ResponseHeaderData();
        header.read(r, hv);
        ApiMessage body = request ? t.newRequest() : t.newResponse();
        body.read(r, version);
        if (r.remaining() != 0) {
            throw new IllegalStateException(r.remaining() + " bytes left after the body");
        }
        ObjectSerializationCache cache = new ObjectSerializationCache();
        int size = header.size(cache, hv) + body.size(cache, version);
        ByteBuffer buf = ByteBuffer.allocate(size);
        ByteBufferAccessor w = new ByteBufferAccessor(buf);
        header.write(w, cache, hv);
        body.write(w, cache, version);
        if (buf.hasRemaining()) {
            throw new IllegalStateException("size() said " + size + " but " + buf.position() + " written");
        }
        return hv + " " + hex(buf.array());
    }

    /**
     * Canonical text of batches, the same the Rust test derives from its own
     * decoding: per batch {@code B <compression> <baseOffset> <ple> <pid>
     * <epoch> <baseSequence> <txn 0|1> <control 0|1> <C|L> <maxTimestamp>
     * <lastOffsetDelta>}, then per record {@code R <offsetDelta> <timestamp>
     * <key> <value> <headers>} where headers are {@code keyhex.valuehex}
     * joined by {@code /} ({@code _} for none). Fields are joined by
     * {@code ,}, batches and records by {@code ;}.
     */
    static String batches(byte[] bytes) {
        MemoryRecords recs = MemoryRecords.readableRecords(ByteBuffer.wrap(bytes));
        List<String> parts = new ArrayList<>();
        List<String> rebuilt = new ArrayList<>();
        int total = 0;
        for (MutableRecordBatch b : recs.batches()) {
            b.ensureValid();
            total += b.sizeInBytes();
            List<String> desc = new ArrayList<>();
            desc.add(String.join(",", "B", b.compressionType().name, Long.toString(b.baseOffset()),
                Integer.toString(b.partitionLeaderEpoch()), Long.toString(b.producerId()),
                Short.toString(b.producerEpoch()), Integer.toString(b.baseSequence()),
                b.isTransactional() ? "1" : "0", b.isControlBatch() ? "1" : "0",
                b.timestampType() == TimestampType.LOG_APPEND_TIME ? "L" : "C",
                Long.toString(b.maxTimestamp()), Long.toString(b.lastOffset() - b.baseOffset())));
            for (Record r : b) {
                r.ensureValid();
                List<String> hs = new ArrayList<>();
                for (Header h : r.headers()) {
                    hs.add(hex(h.key().getBytes(StandardCharsets.UTF_8)) + "." + hexOrNull(h.value()));
                }
                desc.add(String.join(",", "R", Long.toString(r.offset() - b.baseOffset()),
                    Long.toString(r.timestamp()), hexOrNull(r.key()), hexOrNull(r.value()),
                    hs.isEmpty() ? "_" : String.join("/", hs)));
            }
            parts.addAll(desc);
            rebuilt.add(b.isCompressed() ? "-" : hex(build(String.join(";", desc).split(";"))));
        }
        if (total != bytes.length) {
            throw new IllegalStateException((bytes.length - total) + " trailing bytes");
        }
        return String.join(";", parts) + " " + String.join(",", rebuilt);
    }

    /** One batch from a description (the batch line first, then records). */
    static byte[] build(String[] desc) {
        String[] b = desc[0].split(",", -1);
        Compression compression = b[1].equals("none") ? Compression.NONE : Compression.of(b[1]).build();
        long baseOffset = Long.parseLong(b[2]);
        int ple = Integer.parseInt(b[3]);
        long pid = Long.parseLong(b[4]);
        short epoch = Short.parseShort(b[5]);
        int seq = Integer.parseInt(b[6]);
        boolean txn = b[7].equals("1");
        boolean control = b[8].equals("1");
        boolean logAppend = b[9].equals("L");
        long maxTimestamp = Long.parseLong(b[10]);
        ByteBuffer buf = ByteBuffer.allocate(1024 + 2 * desc.length * 256 + totalLength(desc));
        MemoryRecordsBuilder mb = MemoryRecords.builder(buf, RecordBatch.MAGIC_VALUE_V2, compression,
            logAppend ? TimestampType.LOG_APPEND_TIME : TimestampType.CREATE_TIME, baseOffset,
            logAppend ? maxTimestamp : RecordBatch.NO_TIMESTAMP, pid, epoch, seq, txn, control, ple);
        for (int i = 1; i < desc.length; i++) {
            String[] r = desc[i].split(",", -1);
            List<Header> hs = new ArrayList<>();
            if (!r[5].equals("_")) {
                for (String h : r[5].split("/")) {
                    String[] kv = h.split("\\.", -1);
                    hs.add(new RecordHeader(new String(unhex(kv[0]), StandardCharsets.UTF_8),
                        kv[1].equals("-") ? null : unhex(kv[1])));
                }
            }
            SimpleRecord sr = new SimpleRecord(Long.parseLong(r[2]), nullOrBytes(r[3]), nullOrBytes(r[4]),
                hs.toArray(new Header[0]));
            long offset = baseOffset + Long.parseLong(r[1]);
            if (control) {
                mb.appendControlRecordWithOffset(offset, sr);
            } else {
                mb.appendWithOffset(offset, sr);
            }
        }
        ByteBuffer built = mb.build().buffer();
        byte[] outBytes = new byte[built.remaining()];
        built.get(outBytes);
        return outBytes;
    }

    static int totalLength(String[] desc) {
        int n = 0;
        for (String d : desc) {
            n += d.length();
        }
        return n;
    }

    static byte[] nullOrBytes(String h) {
        return h.equals("-") ? null : unhex(h);
    }

    static String hexOrNull(ByteBuffer b) {
        if (b == null) {
            return "-";
        }
        byte[] a = new byte[b.remaining()];
        b.duplicate().get(a);
        return hex(a);
    }

    static String hexOrNull(byte[] b) {
        return b == null ? "-" : hex(b);
    }

    static final char[] DIGITS = "0123456789abcdef".toCharArray();

    static String hex(byte[] b) {
        char[] c = new char[b.length * 2];
        for (int i = 0; i < b.length; i++) {
            c[2 * i] = DIGITS[(b[i] >> 4) & 0xf];
            c[2 * i + 1] = DIGITS[b[i] & 0xf];
        }
        return new String(c);
    }

    static byte[] unhex(String s) {
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return b;
    }
}
