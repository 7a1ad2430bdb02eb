// Reward callback receiver for a game server: Java 17, JDK only (com.sun.net.httpserver, javax.crypto).
// Run: SERVER_ID=<your server id> CALLBACK_SECRET=whsec_... PORT=8080 java Receiver.java   (see README.md)

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public class Receiver {
    /** The contract's replay window: refuse a signature whose t is more than 300 s from now. */
    static final long TOLERANCE_SECONDS = 300;
    static final Pattern MAC_HEX = Pattern.compile("^[0-9a-f]{64}$");
    /** One secret, or several separated by commas during a rotation (any of them verifies). */
    static final List<String> SECRETS = new ArrayList<>();
    /**
     * SERVER_ID, your server's id (dashboard, server settings). A valid signature proves the list sent a callback;
     * only its server_id proves it is for you: the list signs every server's callbacks, so a callback for another
     * server is refused however well it is signed.
     */
    static String serverId;
    /** The dedupe store: one paid heart_id per line, appended and forced to disk before answering 2xx. */
    static Path paidFile;
    /** TEST ONLY: RECEIVER_NOW, a fixed "now" in unix seconds so the frozen vectors verify. Never set it in production. */
    static String fixedNow;
    static final Set<String> PAID = new HashSet<>();

    /** ===== THE PAY HOOK: replace this with your game's reward (a console command, a plugin API call). ===== */
    static void payReward(String heartId, String username) {
        System.out.println("PAID " + heartId + " " + username);
        System.out.flush();
    }

    static void recordPaid(String heartId) throws IOException {
        Files.writeString(paidFile, heartId + "\n", StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND,
            StandardOpenOption.WRITE, StandardOpenOption.SYNC);
        PAID.add(heartId);
    }

    /** "ok" | "malformed" | "stale" | "bad_signature", checked over the raw body bytes. */
    static String verify(byte[] rawBody, String header) throws Exception {
        String t = null;
        List<byte[]> macs = new ArrayList<>();
        for (String part : header.split(",")) {
            String[] kv = part.trim().split("=", 2);
            if (kv.length != 2) continue;
            if (kv[0].equals("t")) t = kv[1];
            if (kv[0].equals("v1") && MAC_HEX.matcher(kv[1]).matches()) macs.add(HexFormat.of().parseHex(kv[1]));
        }
        if (t == null || !t.matches("\\d{1,18}") || macs.isEmpty()) return "malformed";
        long now = fixedNow != null && !fixedNow.isEmpty() ? Long.parseLong(fixedNow) : System.currentTimeMillis() / 1000;
        boolean matched = false;
        for (String secret : SECRETS) {
            Mac hmac = Mac.getInstance("HmacSHA256");
            hmac.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
            hmac.update((t + ".").getBytes(StandardCharsets.UTF_8));
            byte[] expected = hmac.doFinal(rawBody);
            for (byte[] mac : macs) matched = MessageDigest.isEqual(mac, expected) || matched; // constant time
        }
        if (!matched) return "bad_signature";
        if (Math.abs(now - Long.parseLong(t)) > TOLERANCE_SECONDS) return "stale";
        return "ok";
    }

    static void answer(HttpExchange ex, int status, String json) throws IOException {
        byte[] bytes = json.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, bytes.length);
        ex.getResponseBody().write(bytes);
        ex.close();
    }

    static synchronized void handle(HttpExchange ex) throws IOException {
        try {
            if (!ex.getRequestMethod().equals("POST")) { answer(ex, 405, "{\"error\":\"POST the reward callback here\"}"); return; }
            byte[] rawBody = ex.getRequestBody().readAllBytes();
            String header = ex.getRequestHeaders().getFirst("X-Service-Signature");
            if (header == null) header = "";
            String verdict = verify(rawBody, header);
            // Any non-2xx makes the service retry later; never answer 410 here (410 disables your callback).
            if (verdict.equals("malformed")) { answer(ex, 400, "{\"error\":\"missing or malformed X-Service-Signature header\"}"); return; }
            if (!verdict.equals("ok")) { answer(ex, 401, "{\"error\":\"signature rejected: " + verdict + "\"}"); return; }
            Map<String, Object> event;
            try {
                event = Json.parseObject(new String(rawBody, StandardCharsets.UTF_8)); // parse only after the signature checked out
            } catch (IllegalArgumentException e) {
                // Failure policy: a signed body that is not JSON is refused (400); the service retries.
                answer(ex, 400, "{\"error\":\"body is not valid JSON\"}");
                return;
            }
            // Signed by the list, but for whom? Before anything is paid or recorded.
            if (!serverId.equals(event.get("server_id"))) {
                answer(ex, 403, "{\"error\":\"server_id mismatch: this receiver is for server " + serverId + "\"}");
                return;
            }
            Matcher tm = Pattern.compile("t=(\\d+)").matcher(header);
            tm.find();
            Object timestamp = event.get("timestamp");
            if (timestamp != null && !timestamp.toString().equals(tm.group(1))) {
                answer(ex, 400, "{\"error\":\"timestamp differs from the signature's t\"}");
                return;
            }
            Object type = event.get("event");
            if ("heart.test".equals(type)) { answer(ex, 200, "{\"ok\":true,\"test\":true}"); return; } // the dashboard's test: pay nothing
            if (!"heart.counted".equals(type)) { answer(ex, 200, "{\"ok\":true,\"ignored\":true}"); return; }
            if (!(event.get("heart_id") instanceof String heartId) || !(event.get("username") instanceof String username)) {
                answer(ex, 400, "{\"error\":\"heart_id and username are required\"}");
                return;
            }
            if (PAID.contains(heartId)) { answer(ex, 200, "{\"ok\":true,\"duplicate\":true}"); return; } // a retry or redelivery
            payReward(heartId, username);
            recordPaid(heartId);
            answer(ex, 200, "{\"ok\":true,\"paid\":true}");
        } catch (Exception e) {
            // Failure policy: not paid or not recorded -> 500, so the service retries the same heart_id later.
            System.err.println("callback failed: " + e);
            answer(ex, 500, "{\"error\":\"reward failed, retry later\"}");
        }
    }

    public static void main(String[] args) throws Exception {
        serverId = System.getenv().getOrDefault("SERVER_ID", "").trim();
        if (serverId.isEmpty()) { System.err.println("set SERVER_ID=<your server's id> (dashboard, server settings): a callback for another server is refused"); System.exit(2); }
        for (String s : System.getenv().getOrDefault("CALLBACK_SECRET", "").split(",")) if (!s.isBlank()) SECRETS.add(s.trim());
        if (SECRETS.isEmpty()) { System.err.println("set CALLBACK_SECRET=whsec_... (several comma-separated during a rotation)"); System.exit(2); }
        paidFile = Path.of(System.getenv().getOrDefault("PAID_FILE", "paid-hearts.txt"));
        fixedNow = System.getenv("RECEIVER_NOW");
        if (Files.exists(paidFile)) for (String line : Files.readAllLines(paidFile)) if (!line.isBlank()) PAID.add(line.trim());
        int port = Integer.parseInt(System.getenv().getOrDefault("PORT", "8080"));
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
        server.createContext("/", Receiver::handle);
        server.start();
        System.out.println("listening on http://127.0.0.1:" + port + " (server " + serverId + ")");
        System.out.flush();
    }

    /** A minimal JSON reader (objects, arrays, strings, numbers, true/false/null): enough for the callback body, no library needed. */
    static final class Json {
        private final String s;
        private int i;
        private Json(String s) { this.s = s; }

        static Map<String, Object> parseObject(String text) {
            Json p = new Json(text);
            Object value = p.value();
            p.space();
            if (p.i != p.s.length() || !(value instanceof Map)) throw new IllegalArgumentException("not a JSON object");
            @SuppressWarnings("unchecked") Map<String, Object> map = (Map<String, Object>) value;
            return map;
        }

        private void space() { while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++; }
        private char peek() { if (i >= s.length()) throw new IllegalArgumentException("end of input"); return s.charAt(i); }
        private void expect(char c) { if (peek() != c) throw new IllegalArgumentException("expected " + c); i++; }

        private Object value() {
            space();
            char c = peek();
            if (c == '{') {
                i++;
                Map<String, Object> map = new LinkedHashMap<>();
                space();
                if (peek() == '}') { i++; return map; }
                while (true) {
                    space();
                    String key = string();
                    space();
                    expect(':');
                    map.put(key, value());
                    space();
                    if (peek() == ',') { i++; continue; }
                    expect('}');
                    return map;
                }
            }
            if (c == '[') {
                i++;
                List<Object> list = new ArrayList<>();
                space();
                if (peek() == ']') { i++; return list; }
                while (true) {
                    list.add(value());
                    space();
                    if (peek() == ',') { i++; continue; }
                    expect(']');
                    return list;
                }
            }
            if (c == '"') return string();
            for (String word : new String[] {"true", "false", "null"}) {
                if (s.startsWith(word, i)) { i += word.length(); return word.equals("null") ? null : Boolean.valueOf(word); }
            }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
            if (start == i) throw new IllegalArgumentException("unexpected " + c);
            return new java.math.BigDecimal(s.substring(start, i)).stripTrailingZeros().toPlainString();
        }

        private String string() {
            expect('"');
            StringBuilder out = new StringBuilder();
            while (true) {
                char c = peek();
                i++;
                if (c == '"') return out.toString();
                if (c != '\\') { out.append(c); continue; }
                char e = peek();
                i++;
                switch (e) {
                    case 'n' -> out.append('\n');
                    case 't' -> out.append('\t');
                    case 'r' -> out.append('\r');
                    case 'b' -> out.append('\b');
                    case 'f' -> out.append('\f');
                    case 'u' -> { out.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; }
                    default -> out.append(e);
                }
            }
        }
    }
}
