// TEST CODE, never shipped: a small emulation of the uMod (Oxide) API that docs/plugins/oxide/RewardQueue.cs uses,
// written from uMod's published API (Oxide.Core, Oxide.Core.Libraries, Covalence), so the plugin runs under Mono
// in the tests exactly as written. Built with it: mcs -out:host.exe OxideHost.cs RewardQueue.cs
//
// Time is virtual: nothing happens until the test says so on stdin, one line at a time, and every line is
// answered "READY <seconds>" once everything it caused (timers, web requests and their callbacks) is done:
//   join <name> <id>   a player connects (OnUserConnected)      leave <name>   a player disconnects
//   advance <seconds>  the clock moves on, second by second, firing the timers due
// What the plugin does is printed: "COMMAND <console command>" for server.Command, "REQUEST <method> <path>"
// for each web request (never its query: the key stays out of the output), "LOG <text>" for Puts and the like.
// OXIDE_DIR holds config/ and data/ as oxide/ does. HOST_EXIT_BEFORE_PATH: the process dies (exit 137) just
// before sending the first request to that path, as a server killed at that moment.
using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Net;
using System.Reflection;
using System.Text;

namespace Newtonsoft.Json
{
    [AttributeUsage(AttributeTargets.Field | AttributeTargets.Property)]
    public class JsonPropertyAttribute : Attribute
    {
        public string PropertyName { get; set; }
        public JsonPropertyAttribute(string name) { PropertyName = name; }
    }

    public class JsonException : Exception
    {
        public JsonException(string message) : base(message) { }
    }

    /// <summary>The subset of Json.NET the plugin uses: objects to and from JSON by [JsonProperty] names.</summary>
    public static class JsonConvert
    {
        public static T DeserializeObject<T>(string text) => (T)Convert(new Reader(text).ReadDocument(), typeof(T));

        public static string SerializeObject(object value)
        {
            var sb = new StringBuilder();
            Write(sb, value);
            return sb.ToString();
        }

        internal static object Convert(object parsed, Type type)
        {
            if (parsed == null) return type.IsValueType ? Activator.CreateInstance(type) : null;
            if (type == typeof(object)) return parsed;
            if (type == typeof(string)) return parsed is string s ? s : throw new JsonException("expected a string");
            if (type == typeof(bool)) return parsed is bool b ? b : throw new JsonException("expected a boolean");
            if (type == typeof(int) || type == typeof(long) || type == typeof(double) || type == typeof(float))
                return parsed is double d ? System.Convert.ChangeType(d, type, CultureInfo.InvariantCulture) : throw new JsonException("expected a number");
            if (type.IsGenericType && type.GetGenericTypeDefinition() == typeof(List<>))
            {
                if (!(parsed is List<object> items)) throw new JsonException("expected an array");
                var list = (IList)Activator.CreateInstance(type);
                var itemType = type.GetGenericArguments()[0];
                foreach (var item in items) list.Add(Convert(item, itemType));
                return list;
            }
            if (!(parsed is Dictionary<string, object> fields)) throw new JsonException("expected an object");
            var result = Activator.CreateInstance(type, true);
            foreach (var member in Members(type))
            {
                if (!fields.TryGetValue(member.Key, out var value)) continue;
                if (member.Value is FieldInfo f) f.SetValue(result, Convert(value, f.FieldType));
                else if (member.Value is PropertyInfo p) p.SetValue(result, Convert(value, p.PropertyType));
            }
            return result;
        }

        static IEnumerable<KeyValuePair<string, MemberInfo>> Members(Type type)
        {
            const BindingFlags flags = BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic;
            foreach (var f in type.GetFields(flags))
            {
                if (f.IsDefined(typeof(System.Runtime.CompilerServices.CompilerGeneratedAttribute), false)) continue;
                var attr = f.GetCustomAttribute<JsonPropertyAttribute>();
                if (attr != null || f.IsPublic) yield return new KeyValuePair<string, MemberInfo>(attr?.PropertyName ?? f.Name, f);
            }
            foreach (var p in type.GetProperties(flags))
            {
                var attr = p.GetCustomAttribute<JsonPropertyAttribute>();
                if (attr != null || p.GetGetMethod() != null) yield return new KeyValuePair<string, MemberInfo>(attr?.PropertyName ?? p.Name, p);
            }
        }

        static void Write(StringBuilder sb, object value)
        {
            if (value is int || value is long || value is double || value is float)
            {
                sb.Append(System.Convert.ToString(value, CultureInfo.InvariantCulture));
                return;
            }
            if (value == null)
            {
                sb.Append("null");
                return;
            }
            if (value is string s)
            {
                sb.Append('"');
                foreach (var c in s)
                {
                    if (c == '"' || c == '\\') sb.Append('\\').Append(c);
                    else if (c < 0x20) sb.Append("\\u").Append(((int)c).ToString("x4"));
                    else sb.Append(c);
                }
                sb.Append('"');
                return;
            }
            if (value is bool b)
            {
                sb.Append(b ? "true" : "false");
                return;
            }
            if (value is IEnumerable items)
            {
                sb.Append('[');
                var first = true;
                foreach (var item in items)
                {
                    if (!first) sb.Append(',');
                    first = false;
                    Write(sb, item);
                }
                sb.Append(']');
                return;
            }
            sb.Append('{');
            var firstField = true;
            foreach (var member in Members(value.GetType()))
            {
                if (!firstField) sb.Append(',');
                firstField = false;
                Write(sb, member.Key);
                sb.Append(':');
                Write(sb, member.Value is FieldInfo f ? f.GetValue(value) : ((PropertyInfo)member.Value).GetValue(value));
            }
            sb.Append('}');
        }

        class Reader
        {
            readonly string text;
            int at;
            public Reader(string text) { this.text = text ?? ""; }

            public object ReadDocument()
            {
                var value = ReadValue();
                SkipSpace();
                if (at != text.Length) throw new JsonException("text after the JSON value");
                return value;
            }

            void SkipSpace() { while (at < text.Length && char.IsWhiteSpace(text[at])) at++; }

            object ReadValue()
            {
                SkipSpace();
                if (at >= text.Length) throw new JsonException("unexpected end");
                var c = text[at];
                if (c == '{')
                {
                    at++;
                    var obj = new Dictionary<string, object>();
                    SkipSpace();
                    if (text[at] == '}') { at++; return obj; }
                    for (;;)
                    {
                        SkipSpace();
                        var key = ReadString();
                        SkipSpace();
                        Expect(':');
                        obj[key] = ReadValue();
                        SkipSpace();
                        if (text[at] == ',') { at++; continue; }
                        Expect('}');
                        return obj;
                    }
                }
                if (c == '[')
                {
                    at++;
                    var list = new List<object>();
                    SkipSpace();
                    if (text[at] == ']') { at++; return list; }
                    for (;;)
                    {
                        list.Add(ReadValue());
                        SkipSpace();
                        if (text[at] == ',') { at++; continue; }
                        Expect(']');
                        return list;
                    }
                }
                if (c == '"') return ReadString();
                if (text.Substring(at).StartsWith("true")) { at += 4; return true; }
                if (text.Substring(at).StartsWith("false")) { at += 5; return false; }
                if (text.Substring(at).StartsWith("null")) { at += 4; return null; }
                var start = at;
                while (at < text.Length && "+-0123456789.eE".IndexOf(text[at]) >= 0) at++;
                if (start == at) throw new JsonException("unexpected character");
                return double.Parse(text.Substring(start, at - start), CultureInfo.InvariantCulture);
            }

            void Expect(char c)
            {
                if (at >= text.Length || text[at] != c) throw new JsonException("expected " + c);
                at++;
            }

            string ReadString()
            {
                Expect('"');
                var sb = new StringBuilder();
                for (;;)
                {
                    var c = text[at++];
                    if (c == '"') return sb.ToString();
                    if (c != '\\') { sb.Append(c); continue; }
                    var e = text[at++];
                    switch (e)
                    {
                        case 'n': sb.Append('\n'); break;
                        case 't': sb.Append('\t'); break;
                        case 'r': sb.Append('\r'); break;
                        case 'b': sb.Append('\b'); break;
                        case 'f': sb.Append('\f'); break;
                        case 'u': sb.Append((char)int.Parse(text.Substring(at, 4), NumberStyles.HexNumber)); at += 4; break;
                        default: sb.Append(e); break;
                    }
                }
            }
        }
    }
}

namespace Oxide.Core.Configuration
{
    /// <summary>A JSON file of the plugin's (oxide/config/&lt;Plugin&gt;.json, oxide/data/&lt;name&gt;.json).</summary>
    public class DynamicConfigFile
    {
        public string Filename { get; }
        public DynamicConfigFile(string filename) { Filename = filename; }
        public bool Exists() => File.Exists(Filename);

        public T ReadObject<T>()
        {
            if (!Exists()) return (T)Activator.CreateInstance(typeof(T), true);
            return Newtonsoft.Json.JsonConvert.DeserializeObject<T>(File.ReadAllText(Filename));
        }

        public void WriteObject<T>(T value, bool sync = false, string filename = null)
        {
            Directory.CreateDirectory(Path.GetDirectoryName(Filename));
            // Written whole and renamed into place, as a crash mid-write must not lose the file.
            var temp = Filename + ".tmp";
            File.WriteAllText(temp, Newtonsoft.Json.JsonConvert.SerializeObject(value));
            if (File.Exists(Filename)) File.Replace(temp, Filename, null);
            else File.Move(temp, Filename);
        }
    }
}

namespace Oxide.Core
{
    using Oxide.Core.Configuration;

    public class DataFileSystem
    {
        readonly string directory;
        public DataFileSystem(string directory) { this.directory = directory; }
        DynamicConfigFile FileOf(string name) => new DynamicConfigFile(Path.Combine(directory, name + ".json"));
        public bool ExistsDatafile(string name) => FileOf(name).Exists();
        public T ReadObject<T>(string name) => FileOf(name).ReadObject<T>();
        public void WriteObject<T>(string name, T value, bool sync = false) => FileOf(name).WriteObject(value, sync);
    }

    public class OxideMod
    {
        public string RootDirectory { get; }
        public string ConfigDirectory => Path.Combine(RootDirectory, "config");
        public string DataDirectory => Path.Combine(RootDirectory, "data");
        public DataFileSystem DataFileSystem { get; }
        public OxideMod(string root)
        {
            RootDirectory = root;
            DataFileSystem = new DataFileSystem(DataDirectory);
        }
    }

    public static class Interface
    {
        public static OxideMod Oxide { get; internal set; }
    }
}

namespace Oxide.Core.Plugins
{
    using Oxide.Core.Configuration;
    using Oxide.Core.Libraries;
    using Oxide.Core.Libraries.Covalence;

    public abstract class Plugin
    {
        public string Name => GetType().Name;
        protected DynamicConfigFile Config { get; private set; }
        protected Oxide.Plugins.PluginTimers timer;
        protected WebRequests webrequest;
        protected IServer server;
        protected IPlayerManager players;

        internal void Attach(Oxide.Plugins.PluginTimers timers, WebRequests requests, IServer theServer, IPlayerManager thePlayers)
        {
            timer = timers;
            webrequest = requests;
            server = theServer;
            players = thePlayers;
            Config = new DynamicConfigFile(Path.Combine(Interface.Oxide.ConfigDirectory, Name + ".json"));
        }

        protected virtual void LoadConfig()
        {
            if (!Config.Exists())
            {
                LoadDefaultConfig();
                SaveConfig();
            }
        }

        protected virtual void LoadDefaultConfig() { }
        protected virtual void SaveConfig() { }
        internal void CallLoadConfig() => LoadConfig();

        protected void Puts(string format, params object[] args) => Console.WriteLine("LOG " + (args.Length > 0 ? string.Format(format, args) : format));
        protected void PrintWarning(string format, params object[] args) => Puts("warning: " + format, args);
        protected void PrintError(string format, params object[] args) => Puts("error: " + format, args);

        /// <summary>Calls a hook by name, as Oxide does (private methods included); false when the plugin has none.</summary>
        internal bool CallHook(string name, params object[] args)
        {
            var method = GetType().GetMethod(name, BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic);
            if (method == null) return false;
            method.Invoke(this, args);
            return true;
        }
    }
}

namespace Oxide.Core.Libraries
{
    public enum RequestMethod { DELETE, GET, PATCH, POST, PUT }

    /// <summary>Oxide's web requests: queued, performed later, the callback given (code, body); code 0 when there was no answer.</summary>
    public class WebRequests
    {
        internal readonly Queue<Action> Pending = new Queue<Action>();
        readonly string exitBeforePath = Environment.GetEnvironmentVariable("HOST_EXIT_BEFORE_PATH");

        public void Enqueue(string url, string body, Action<int, string> callback, Oxide.Core.Plugins.Plugin owner, RequestMethod method = RequestMethod.GET, Dictionary<string, string> headers = null, float timeout = 0f)
        {
            Pending.Enqueue(() =>
            {
                var path = new Uri(url).AbsolutePath;
                if (!string.IsNullOrEmpty(exitBeforePath) && path == exitBeforePath)
                {
                    Console.WriteLine("KILLED before " + method + " " + path);
                    Console.Out.Flush();
                    Environment.Exit(137);
                }
                Console.WriteLine("REQUEST " + method + " " + path);
                int code;
                string text;
                try
                {
                    var request = (HttpWebRequest)WebRequest.Create(url);
                    request.Method = method.ToString();
                    request.Timeout = timeout > 0 ? (int)(timeout * 1000) : 30000;
                    if (headers != null)
                        foreach (var h in headers)
                            if (string.Equals(h.Key, "Content-Type", StringComparison.OrdinalIgnoreCase)) request.ContentType = h.Value;
                            else request.Headers[h.Key] = h.Value;
                    if (body != null)
                    {
                        var bytes = Encoding.UTF8.GetBytes(body);
                        request.ContentLength = bytes.Length;
                        using (var s = request.GetRequestStream()) s.Write(bytes, 0, bytes.Length);
                    }
                    using (var response = (HttpWebResponse)request.GetResponse())
                    using (var reader = new StreamReader(response.GetResponseStream()))
                    {
                        code = (int)response.StatusCode;
                        text = reader.ReadToEnd();
                    }
                }
                catch (WebException error) when (error.Response is HttpWebResponse response)
                {
                    using (var reader = new StreamReader(response.GetResponseStream())) text = reader.ReadToEnd();
                    code = (int)response.StatusCode;
                }
                catch (WebException error)
                {
                    code = 0;
                    text = error.Message;
                }
                callback(code, text);
            });
        }
    }
}

namespace Oxide.Core.Libraries.Covalence
{
    public interface IPlayer
    {
        string Id { get; }
        string Name { get; }
        bool IsConnected { get; }
    }

    public interface IServer
    {
        void Command(string command, params object[] args);
    }

    public interface IPlayerManager
    {
        IEnumerable<IPlayer> Connected { get; }
    }
}

namespace Oxide.Plugins
{
    using Oxide.Core.Libraries.Covalence;

    [AttributeUsage(AttributeTargets.Class)]
    public class InfoAttribute : Attribute
    {
        public string Title { get; }
        public string Author { get; }
        public string Version { get; }
        public InfoAttribute(string title, string author, string version) { Title = title; Author = author; Version = version; }
    }

    [AttributeUsage(AttributeTargets.Class)]
    public class DescriptionAttribute : Attribute
    {
        public string Description { get; }
        public DescriptionAttribute(string description) { Description = description; }
    }

    public class Timer
    {
        internal double DueAt;
        internal float Interval;
        internal int Repetitions;
        internal Action Callback;
        internal bool Destroyed;
        public void Destroy() { Destroyed = true; }
    }

    /// <summary>The plugin's `timer`: Once, Every and Repeat on the host's virtual clock.</summary>
    public class PluginTimers
    {
        internal readonly List<Timer> Timers = new List<Timer>();
        internal double Now;

        public Timer Once(float seconds, Action callback) => Add(seconds, 1, callback);
        public Timer Every(float seconds, Action callback) => Add(seconds, 0, callback);
        public Timer Repeat(float seconds, int repetitions, Action callback) => Add(seconds, repetitions, callback);

        Timer Add(float seconds, int repetitions, Action callback)
        {
            var t = new Timer { DueAt = Now + seconds, Interval = seconds, Repetitions = repetitions, Callback = callback };
            Timers.Add(t);
            return t;
        }
    }

    public abstract class CovalencePlugin : Oxide.Core.Plugins.Plugin { }
}

namespace OxideHost
{
    using Oxide.Core;
    using Oxide.Core.Libraries;
    using Oxide.Core.Libraries.Covalence;
    using Oxide.Plugins;

    class HostPlayer : IPlayer
    {
        public string Id { get; set; }
        public string Name { get; set; }
        public bool IsConnected => true;
    }

    class HostServer : IServer, IPlayerManager
    {
        public readonly List<HostPlayer> Online = new List<HostPlayer>();
        public IEnumerable<IPlayer> Connected => Online.ToArray();

        public void Command(string command, params object[] args)
        {
            var line = command;
            foreach (var a in args) line += " " + a;
            Console.WriteLine("COMMAND " + line);
        }
    }

    static class Program
    {
        static PluginTimers timers;
        static WebRequests requests;

        static int Main()
        {
            Console.Out.NewLine = "\n";
            var stdout = new StreamWriter(Console.OpenStandardOutput()) { AutoFlush = true, NewLine = "\n" };
            Console.SetOut(stdout);
            Interface.Oxide = new OxideMod(Environment.GetEnvironmentVariable("OXIDE_DIR") ?? "oxide");
            Type pluginType = null;
            foreach (var type in typeof(Program).Assembly.GetTypes())
                if (type.IsSubclassOf(typeof(CovalencePlugin)) && !type.IsAbstract) pluginType = type;
            var plugin = (CovalencePlugin)Activator.CreateInstance(pluginType);
            var host = new HostServer();
            timers = new PluginTimers();
            requests = new WebRequests();
            plugin.Attach(timers, requests, host, host);
            plugin.CallLoadConfig();
            plugin.CallHook("Init");
            plugin.CallHook("OnServerInitialized");
            Settle();
            Ready();
            string line;
            while ((line = Console.In.ReadLine()) != null)
            {
                var parts = line.Trim().Split(' ');
                switch (parts[0])
                {
                    case "join":
                        var player = new HostPlayer { Name = parts[1], Id = parts.Length > 2 ? parts[2] : parts[1] };
                        host.Online.Add(player);
                        plugin.CallHook("OnUserConnected", player);
                        Settle();
                        break;
                    case "leave":
                        var gone = host.Online.Find(p => p.Name == parts[1]);
                        if (gone != null)
                        {
                            host.Online.Remove(gone);
                            plugin.CallHook("OnUserDisconnected", gone, "Disconnected");
                        }
                        Settle();
                        break;
                    case "advance":
                        Advance(double.Parse(parts[1], CultureInfo.InvariantCulture));
                        break;
                }
                Ready();
            }
            return 0;
        }

        static void Ready() => Console.WriteLine("READY " + timers.Now.ToString(CultureInfo.InvariantCulture));

        /// <summary>Performs the queued web requests (and those their callbacks queue) until none is left.</summary>
        static void Settle()
        {
            while (requests.Pending.Count > 0) requests.Pending.Dequeue()();
        }

        /// <summary>Moves the clock on by `seconds`, firing every timer due on the way, in order.</summary>
        static void Advance(double seconds)
        {
            var until = timers.Now + seconds;
            for (;;)
            {
                Timer next = null;
                foreach (var t in timers.Timers)
                    if (!t.Destroyed && t.DueAt <= until && (next == null || t.DueAt < next.DueAt)) next = t;
                if (next == null) break;
                timers.Now = next.DueAt;
                if (next.Repetitions == 1) next.Destroyed = true;
                else
                {
                    if (next.Repetitions > 1) next.Repetitions--;
                    next.DueAt += next.Interval;
                }
                next.Callback();
                Settle();
            }
            timers.Timers.RemoveAll(t => t.Destroyed);
            timers.Now = until;
        }
    }
}
