// Reward callback receiver for a game server: C#, uMod style (one plugin-shaped class with the
// hooks; a small HttpListener host so it runs on its own). Base class library only: builds with
// Mono's `mcs` or the .NET SDK. Run: SERVER_ID=<your server id> CALLBACK_SECRET=whsec_... PORT=8080 mono Receiver.exe (see README.md)
// The /claim flow of a Rust plugin (the check/claim API, no callback needed):
//   CLAIM_URL='https://list.example/api/votes?action=claim&key={0}&steamid={1}' CLAIM_KEY=vck_... mono Receiver.exe claim <SteamID64>
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Net;
using System.Security.Cryptography;
using System.Text;
using System.Text.RegularExpressions;

namespace RewardCallbacks
{
    /// <summary>The plugin: verifies a callback, pays each heart_id once, and says what to answer.</summary>
    public class HeartRewards
    {
        /// <summary>The contract's replay window: refuse a signature whose t is more than 300 s from now.</summary>
        const long ToleranceSeconds = 300;
        static readonly Regex MacHex = new Regex("^[0-9a-f]{64}$");

        readonly List<string> secrets;
        /// <summary>
        /// SERVER_ID, your server's id (dashboard, server settings). A valid signature proves the list sent a callback;
        /// only its server_id proves it is for you: the list signs every server's callbacks, so a callback for another
        /// server is refused however well it is signed.
        /// </summary>
        readonly string serverId;
        readonly string paidFile;
        readonly string fixedNow;
        readonly HashSet<string> paid = new HashSet<string>();
        readonly object gate = new object();

        public HeartRewards(List<string> secrets, string serverId, string paidFile, string fixedNow)
        {
            this.secrets = secrets;
            this.serverId = serverId;
            this.paidFile = paidFile;
            this.fixedNow = fixedNow;
            if (File.Exists(paidFile))
                foreach (var line in File.ReadAllLines(paidFile))
                    if (line.Trim().Length > 0) paid.Add(line.Trim());
        }

        /// <summary>===== THE PAY HOOK: in a uMod plugin, run your reward here (server.Command("inventory.giveto", username, ...)). =====</summary>
        void OnHeartCounted(string heartId, string username)
        {
            Console.WriteLine("PAID " + heartId + " " + username);
            Console.Out.Flush();
        }

        void RecordPaid(string heartId)
        {
            var bytes = Encoding.UTF8.GetBytes(heartId + "\n");
            using (var f = new FileStream(paidFile, FileMode.Append, FileAccess.Write))
            {
                f.Write(bytes, 0, bytes.Length);
                f.Flush(true);
            }
            paid.Add(heartId);
        }

        static bool FixedTimeEquals(byte[] a, byte[] b)
        {
            if (a.Length != b.Length) return false;
            int diff = 0;
            for (int i = 0; i < a.Length; i++) diff |= a[i] ^ b[i];
            return diff == 0;
        }

        /// <summary>"ok" | "malformed" | "stale" | "bad_signature", checked over the raw body bytes.</summary>
        string Verify(byte[] rawBody, string header, out long t)
        {
            t = 0;
            string tText = null;
            var macs = new List<byte[]>();
            foreach (var part in header.Split(','))
            {
                var kv = part.Trim().Split(new[] { '=' }, 2);
                if (kv.Length != 2) continue;
                if (kv[0] == "t") tText = kv[1];
                if (kv[0] == "v1" && MacHex.IsMatch(kv[1]))
                {
                    var mac = new byte[32];
                    for (int i = 0; i < 32; i++) mac[i] = Convert.ToByte(kv[1].Substring(i * 2, 2), 16);
                    macs.Add(mac);
                }
            }
            if (tText == null || !Regex.IsMatch(tText, "^[0-9]{1,18}$") || macs.Count == 0) return "malformed";
            t = long.Parse(tText, CultureInfo.InvariantCulture);
            long now = string.IsNullOrEmpty(fixedNow) ? DateTimeOffset.UtcNow.ToUnixTimeSeconds() : long.Parse(fixedNow, CultureInfo.InvariantCulture);
            bool matched = false;
            var prefix = Encoding.UTF8.GetBytes(tText + ".");
            var message = new byte[prefix.Length + rawBody.Length];
            Buffer.BlockCopy(prefix, 0, message, 0, prefix.Length);
            Buffer.BlockCopy(rawBody, 0, message, prefix.Length, rawBody.Length);
            foreach (var secret in secrets)
            {
                using (var hmac = new HMACSHA256(Encoding.UTF8.GetBytes(secret)))
                {
                    var expected = hmac.ComputeHash(message);
                    foreach (var mac in macs) matched = FixedTimeEquals(mac, expected) || matched;
                }
            }
            if (!matched) return "bad_signature";
            if (Math.Abs(now - t) > ToleranceSeconds) return "stale";
            return "ok";
        }

        /// <summary>Handles one callback; returns the status and the JSON body to answer.</summary>
        public KeyValuePair<int, string> OnCallback(byte[] rawBody, string header)
        {
            long t;
            var verdict = Verify(rawBody, header ?? "", out t);
            // Any non-2xx makes the service retry later; never answer 410 here (410 disables your callback).
            if (verdict == "malformed") return Answer(400, "{\"error\":\"missing or malformed X-Service-Signature header\"}");
            if (verdict != "ok") return Answer(401, "{\"error\":\"signature rejected: " + verdict + "\"}");
            Dictionary<string, object> ev;
            try
            {
                ev = MiniJson.ParseObject(Encoding.UTF8.GetString(rawBody)); // parse only after the signature checked out
            }
            catch (FormatException)
            {
                // Failure policy: a signed body that is not JSON is refused (400); the service retries.
                return Answer(400, "{\"error\":\"body is not valid JSON\"}");
            }
            // Signed by the list, but for whom? Before anything is paid or recorded.
            object bodyServerId;
            ev.TryGetValue("server_id", out bodyServerId);
            if (!serverId.Equals(bodyServerId as string))
                return Answer(403, "{\"error\":\"server_id mismatch: this receiver is for server " + serverId + "\"}");
            object timestamp;
            if (ev.TryGetValue("timestamp", out timestamp) && (timestamp as string) != t.ToString(CultureInfo.InvariantCulture))
                return Answer(400, "{\"error\":\"timestamp differs from the signature's t\"}");
            object type;
            ev.TryGetValue("event", out type);
            if ("heart.test".Equals(type)) return Answer(200, "{\"ok\":true,\"test\":true}"); // the dashboard's test: pay nothing
            if (!"heart.counted".Equals(type)) return Answer(200, "{\"ok\":true,\"ignored\":true}");
            object heartIdValue, usernameValue;
            ev.TryGetValue("heart_id", out heartIdValue);
            ev.TryGetValue("username", out usernameValue);
            var heartId = heartIdValue as string;
            var username = usernameValue as string;
            if (heartId == null || username == null) return Answer(400, "{\"error\":\"heart_id and username are required\"}");
            lock (gate) // requests may run at once: the check, the payment and the record happen under one lock
            {
                if (paid.Contains(heartId)) return Answer(200, "{\"ok\":true,\"duplicate\":true}"); // a retry or redelivery
                try
                {
                    OnHeartCounted(heartId, username);
                    RecordPaid(heartId);
                }
                catch (Exception e)
                {
                    // Failure policy: not paid or not recorded -> 500, so the service retries the same heart_id later.
                    Console.Error.WriteLine("pay failed for " + heartId + ": " + e.Message);
                    return Answer(500, "{\"error\":\"reward failed, retry later\"}");
                }
            }
            return Answer(200, "{\"ok\":true,\"paid\":true}");
        }

        static KeyValuePair<int, string> Answer(int status, string json)
        {
            return new KeyValuePair<int, string>(status, json);
        }
    }

    /// <summary>
    /// The plugin's /claim chat command over the list's check/claim API, as EasyVoteExtended does it: GET the
    /// claim URL with the claim key and the player's SteamID64, pay on "1", "already claimed" on "2", "no vote
    /// found" on "0". A claim whose answer was lost (timeout, no answer, not 200) is "in doubt": the list may
    /// have claimed it. The next "2" for that player is then this plugin's own claim, and is paid. The players
    /// in doubt are kept in a file, written before the request, so a crash mid-request counts as doubt too.
    /// </summary>
    public class VoteClaims
    {
        readonly string claimUrl;
        readonly string claimKey;
        readonly string doubtFile;
        readonly object gate = new object();

        /// <param name="claimUrl">A format string: {0} the claim key, {1} the SteamID64 (EasyVoteExtended's "API Claim Reward (GET URL)").</param>
        public VoteClaims(string claimUrl, string claimKey, string doubtFile)
        {
            this.claimUrl = claimUrl;
            this.claimKey = claimKey;
            this.doubtFile = doubtFile;
        }

        /// <summary>===== THE PAY HOOK of a claim: in a uMod plugin, run your reward here (server.Command("inventory.giveto", steamId, ...)). =====</summary>
        void OnVoteClaimed(string steamId)
        {
            Console.WriteLine("PAID claim " + steamId);
            Console.Out.Flush();
        }

        /// <summary>In a uMod plugin: player.Reply(message).</summary>
        void Reply(string steamId, string message)
        {
            Console.WriteLine("REPLY " + steamId + " " + message);
            Console.Out.Flush();
        }

        HashSet<string> InDoubt()
        {
            var set = new HashSet<string>();
            if (File.Exists(doubtFile))
                foreach (var line in File.ReadAllLines(doubtFile))
                    if (line.Trim().Length > 0) set.Add(line.Trim());
            return set;
        }

        void SaveDoubt(HashSet<string> set)
        {
            var tmp = doubtFile + ".tmp";
            using (var f = new FileStream(tmp, FileMode.Create, FileAccess.Write))
            {
                var bytes = Encoding.UTF8.GetBytes(string.Join("\n", set) + "\n");
                f.Write(bytes, 0, bytes.Length);
                f.Flush(true);
            }
            if (File.Exists(doubtFile)) File.Replace(tmp, doubtFile, null);
            else File.Move(tmp, doubtFile);
        }

        /// <summary>The claim's answer, trimmed as the plugin reads it; null when there was none (in doubt).</summary>
        string Claim(string steamId)
        {
            var url = string.Format(CultureInfo.InvariantCulture, claimUrl, Uri.EscapeDataString(claimKey), Uri.EscapeDataString(steamId));
            try
            {
                var request = (HttpWebRequest)WebRequest.Create(url);
                request.Method = "GET";
                request.Timeout = 5000;
                request.ReadWriteTimeout = 5000;
                using (var response = (HttpWebResponse)request.GetResponse())
                using (var reader = new StreamReader(response.GetResponseStream(), Encoding.UTF8))
                {
                    var text = reader.ReadToEnd().Trim();
                    return response.StatusCode == HttpStatusCode.OK ? text : null;
                }
            }
            catch (WebException e)
            {
                // Failure policy: no answer, a timeout or a status other than 200 (a 429 too) is "in doubt": nothing
                // paid now; the player runs /claim again and a "2" then pays (the doubt mark says it was ours).
                Console.Error.WriteLine("claim request failed: " + e.Status);
                return null;
            }
        }

        /// <summary>The /claim command of player `steamId` (SteamID64).</summary>
        public void OnClaimCommand(string steamId)
        {
            lock (gate) // one claim at a time: the doubt mark and the payment stay together
            {
                var doubt = InDoubt();
                bool wasInDoubt = doubt.Contains(steamId);
                if (!wasInDoubt)
                {
                    doubt.Add(steamId);
                    SaveDoubt(doubt); // before the request: a crash or a lost answer leaves the mark
                }
                var answer = Claim(steamId);
                if (answer == null)
                {
                    Reply(steamId, "The vote list did not answer; try /claim again in a minute.");
                    return;
                }
                if (answer == "1" || (answer == "2" && wasInDoubt))
                {
                    OnVoteClaimed(steamId); // a "2" after doubt: the claim whose answer was lost was ours
                    Reply(steamId, "Thanks for voting! Your reward is on its way.");
                }
                else if (answer == "2") Reply(steamId, "You have already claimed your reward for this vote.");
                else if (answer == "0") Reply(steamId, "No vote found: vote for the server first.");
                else
                {
                    // Failure policy: an answer that is not 0, 1 or 2 counts as no answer; the mark stays.
                    Reply(steamId, "The vote list answered something unexpected; try /claim again later.");
                    return;
                }
                doubt.Remove(steamId); // a definite answer: paid, or nothing to pay
                SaveDoubt(doubt);
            }
        }
    }

    /// <summary>A minimal JSON reader (objects, arrays, strings, numbers as text, true/false/null): enough for the callback body.</summary>
    static class MiniJson
    {
        public static Dictionary<string, object> ParseObject(string s)
        {
            int i = 0;
            var value = Value(s, ref i);
            Space(s, ref i);
            var map = value as Dictionary<string, object>;
            if (i != s.Length || map == null) throw new FormatException("not a JSON object");
            return map;
        }

        static void Space(string s, ref int i) { while (i < s.Length && char.IsWhiteSpace(s[i])) i++; }
        static char Peek(string s, int i) { if (i >= s.Length) throw new FormatException("end of input"); return s[i]; }
        static void Expect(string s, ref int i, char c) { if (Peek(s, i) != c) throw new FormatException("expected " + c); i++; }

        static object Value(string s, ref int i)
        {
            Space(s, ref i);
            char c = Peek(s, i);
            if (c == '{')
            {
                i++;
                var map = new Dictionary<string, object>();
                Space(s, ref i);
                if (Peek(s, i) == '}') { i++; return map; }
                while (true)
                {
                    Space(s, ref i);
                    var key = Str(s, ref i);
                    Space(s, ref i);
                    Expect(s, ref i, ':');
                    map[key] = Value(s, ref i);
                    Space(s, ref i);
                    if (Peek(s, i) == ',') { i++; continue; }
                    Expect(s, ref i, '}');
                    return map;
                }
            }
            if (c == '[')
            {
                i++;
                var list = new List<object>();
                Space(s, ref i);
                if (Peek(s, i) == ']') { i++; return list; }
                while (true)
                {
                    list.Add(Value(s, ref i));
                    Space(s, ref i);
                    if (Peek(s, i) == ',') { i++; continue; }
                    Expect(s, ref i, ']');
                    return list;
                }
            }
            if (c == '"') return Str(s, ref i);
            foreach (var word in new[] { "true", "false", "null" })
                if (string.CompareOrdinal(s, i, word, 0, word.Length) == 0) { i += word.Length; return word == "null" ? null : (object)(word == "true"); }
            int start = i;
            while (i < s.Length && "+-0123456789.eE".IndexOf(s[i]) >= 0) i++;
            if (start == i) throw new FormatException("unexpected " + c);
            return s.Substring(start, i - start);
        }

        static string Str(string s, ref int i)
        {
            Expect(s, ref i, '"');
            var sb = new StringBuilder();
            while (true)
            {
                char c = Peek(s, i++);
                if (c == '"') return sb.ToString();
                if (c != '\\') { sb.Append(c); continue; }
                char e = Peek(s, i++);
                switch (e)
                {
                    case 'n': sb.Append('\n'); break;
                    case 't': sb.Append('\t'); break;
                    case 'r': sb.Append('\r'); break;
                    case 'b': sb.Append('\b'); break;
                    case 'f': sb.Append('\f'); break;
                    case 'u': sb.Append((char)Convert.ToInt32(s.Substring(i, 4), 16)); i += 4; break;
                    default: sb.Append(e); break;
                }
            }
        }
    }

    /// <summary>The host: an HttpListener on 127.0.0.1:PORT handing every POST to the plugin.</summary>
    static class Program
    {
        static int Main(string[] args)
        {
            if (args.Length == 2 && args[0] == "claim") return ClaimOnce(args[1]);
            var serverId = (Environment.GetEnvironmentVariable("SERVER_ID") ?? "").Trim();
            if (serverId.Length == 0)
            {
                Console.Error.WriteLine("set SERVER_ID=<your server's id> (dashboard, server settings): a callback for another server is refused");
                return 2;
            }
            var secrets = new List<string>();
            foreach (var s in (Environment.GetEnvironmentVariable("CALLBACK_SECRET") ?? "").Split(','))
                if (s.Trim().Length > 0) secrets.Add(s.Trim());
            if (secrets.Count == 0)
            {
                Console.Error.WriteLine("set CALLBACK_SECRET=whsec_... (several comma-separated during a rotation)");
                return 2;
            }
            var plugin = new HeartRewards(
                secrets,
                serverId,
                Environment.GetEnvironmentVariable("PAID_FILE") ?? "paid-hearts.txt",
                Environment.GetEnvironmentVariable("RECEIVER_NOW")); // TEST ONLY: a fixed now for the frozen vectors
            var port = Environment.GetEnvironmentVariable("PORT") ?? "8080";
            var listener = new HttpListener();
            listener.Prefixes.Add("http://127.0.0.1:" + port + "/");
            listener.Start();
            Console.WriteLine("listening on http://127.0.0.1:" + port + " (server " + serverId + ")");
            Console.Out.Flush();
            while (true)
            {
                var ctx = listener.GetContext();
                KeyValuePair<int, string> answer;
                if (ctx.Request.HttpMethod != "POST")
                {
                    answer = new KeyValuePair<int, string>(405, "{\"error\":\"POST the reward callback here\"}");
                }
                else
                {
                    var body = new MemoryStream();
                    ctx.Request.InputStream.CopyTo(body);
                    answer = plugin.OnCallback(body.ToArray(), ctx.Request.Headers["X-Service-Signature"]);
                }
                var bytes = Encoding.UTF8.GetBytes(answer.Value);
                ctx.Response.StatusCode = answer.Key;
                ctx.Response.ContentType = "application/json";
                ctx.Response.ContentLength64 = bytes.Length;
                ctx.Response.OutputStream.Write(bytes, 0, bytes.Length);
                ctx.Response.Close();
            }
        }

        /// <summary>`mono Receiver.exe claim SteamID64`: one /claim, as the game's chat command would run it.</summary>
        static int ClaimOnce(string steamId)
        {
            var url = Environment.GetEnvironmentVariable("CLAIM_URL");
            var key = Environment.GetEnvironmentVariable("CLAIM_KEY");
            if (string.IsNullOrEmpty(url) || string.IsNullOrEmpty(key))
            {
                Console.Error.WriteLine("set CLAIM_URL=https://<list>/api/votes?action=claim&key={0}&steamid={1} and CLAIM_KEY=vck_...");
                return 2;
            }
            new VoteClaims(url, key, Environment.GetEnvironmentVariable("CLAIM_DOUBT_FILE") ?? "claims-in-doubt.txt").OnClaimCommand(steamId);
            return 0;
        }
    }
}
