// Reward Queue: a uMod (Oxide) plugin for Rust that pays the rewards the list queues for your players.
// Copy this file to oxide/plugins/RewardQueue.cs; set "Queue URL" and "Claim key" in
// oxide/config/RewardQueue.json (see README.md). Every reward is a console command the list rendered.
//
// What it does, every "next_check" seconds the list asks for:
//   1. lists the server's pending entries, naming the players online (online-only entries of the others wait);
//   2. runs each entry's commands in order with server.Command, and writes the entry's id to its data file
//      (oxide/data/RewardQueue_executed.json) before anything else;
//   3. acknowledges the ids it ran; an id leaves the data file once an acknowledgement answered it.
// An id already in the data file is acknowledged without running again: a server stopped between running
// and acknowledging pays nothing twice.
using System;
using System.Collections.Generic;
using Newtonsoft.Json;
using Oxide.Core;
using Oxide.Core.Libraries;
using Oxide.Core.Libraries.Covalence;

namespace Oxide.Plugins
{
    [Info("Reward Queue", "Server list", "1.0.0")]
    [Description("Runs the vote, streak and milestone rewards the server list queues for your players")]
    public class RewardQueue : CovalencePlugin
    {
        const string ExecutedDataFile = "RewardQueue_executed";
        /// <summary>Entries per list; a full page is followed by the next one at once.</summary>
        const int PageSize = 50;
        /// <summary>The API takes at most 100 ids per acknowledgement.</summary>
        const int MaxAckIds = 100;

        PluginConfig config;
        /// <summary>Ids run and not yet acknowledged: kept on disk so a restart never runs them again.</summary>
        HashSet<string> executed = new HashSet<string>();
        int secondsUntilCheck;
        bool busy;

        class PluginConfig
        {
            [JsonProperty("Queue URL")]
            public string QueueUrl = "https://list.example/api/rewards/queue";

            [JsonProperty("Claim key")]
            public string ClaimKey = "";

            [JsonProperty("Seconds before listing again when the list does not answer")]
            public int RetrySeconds = 60;

            [JsonProperty("Seconds after a player joins before their rewards are listed")]
            public int JoinDelaySeconds = 2;
        }

        class QueuePage
        {
            [JsonProperty("entries")]
            public List<QueueEntry> Entries = new List<QueueEntry>();

            [JsonProperty("next_check")]
            public int NextCheck;
        }

        class QueueEntry
        {
            [JsonProperty("id")]
            public string Id;

            [JsonProperty("player")]
            public QueuePlayer Player;

            [JsonProperty("commands")]
            public List<string> Commands = new List<string>();

            [JsonProperty("online_only")]
            public bool OnlineOnly;
        }

        class QueuePlayer
        {
            [JsonProperty("name")]
            public string Name;

            [JsonProperty("steam_id")]
            public string SteamId;
        }

        class AckRequest
        {
            [JsonProperty("ids")]
            public List<string> Ids = new List<string>();
        }

        class AckAnswer
        {
            [JsonProperty("acked")]
            public List<string> Acked = new List<string>();

            [JsonProperty("unknown")]
            public List<string> Unknown = new List<string>();
        }

        protected override void LoadDefaultConfig() => config = new PluginConfig();

        protected override void LoadConfig()
        {
            base.LoadConfig();
            try
            {
                config = Config.ReadObject<PluginConfig>();
                if (config == null) throw new JsonException("empty configuration");
            }
            catch (Exception)
            {
                // Failure policy: fail closed - a broken configuration is reported and replaced by the defaults (no key: nothing is listed).
                PrintError("oxide/config/RewardQueue.json is not valid JSON; using the defaults");
                LoadDefaultConfig();
            }
            SaveConfig();
        }

        protected override void SaveConfig() => Config.WriteObject(config, true);

        void Init()
        {
            var saved = Interface.Oxide.DataFileSystem.ReadObject<List<string>>(ExecutedDataFile);
            if (saved != null) executed = new HashSet<string>(saved);
        }

        void OnServerInitialized()
        {
            if (string.IsNullOrEmpty(config.ClaimKey))
            {
                PrintWarning("Set \"Claim key\" in oxide/config/RewardQueue.json (the claim key from the list's dashboard), then reload the plugin");
                return;
            }
            secondsUntilCheck = 0;
            timer.Every(1f, Tick);
            Tick();
        }

        /// <summary>A player joining: list soon, so their online-only rewards are paid while they play.</summary>
        void OnUserConnected(IPlayer player)
        {
            if (secondsUntilCheck > config.JoinDelaySeconds) secondsUntilCheck = config.JoinDelaySeconds;
        }

        void Tick()
        {
            if (busy) return;
            if (secondsUntilCheck > 0)
            {
                secondsUntilCheck--;
                return;
            }
            ListQueue();
        }

        void ListQueue()
        {
            busy = true;
            var names = new List<string>();
            foreach (var player in players.Connected) names.Add(Uri.EscapeDataString(player.Name));
            var url = config.QueueUrl + "?key=" + Uri.EscapeDataString(config.ClaimKey) + "&limit=" + PageSize + "&online=" + string.Join(",", names.ToArray());
            webrequest.Enqueue(url, null, (code, response) =>
            {
                if (code != 200)
                {
                    // Failure policy: retry later - an unanswered or refused list runs nothing; the entries stay queued.
                    PrintWarning("The reward queue answered " + code + "; listing again in " + config.RetrySeconds + " s");
                    Finish(config.RetrySeconds);
                    return;
                }
                QueuePage page;
                try
                {
                    page = JsonConvert.DeserializeObject<QueuePage>(response);
                }
                catch (Exception)
                {
                    // Failure policy: retry later - an answer we cannot read runs nothing.
                    PrintWarning("The reward queue's answer is not JSON; listing again in " + config.RetrySeconds + " s");
                    Finish(config.RetrySeconds);
                    return;
                }
                var toAck = RunEntries(page.Entries);
                var nextCheck = Math.Max(5, page.NextCheck);
                // A full page that ran something may have more behind it: list again at once.
                if (page.Entries.Count >= PageSize && toAck.Count > 0) nextCheck = 1;
                Acknowledge(toAck, nextCheck);
            }, this, RequestMethod.GET, null, 10f);
        }

        /// <summary>Runs the entries not run before, recording each id first; returns every id to acknowledge.</summary>
        List<string> RunEntries(List<QueueEntry> entries)
        {
            var toAck = new List<string>();
            foreach (var entry in entries)
            {
                if (entry == null || string.IsNullOrEmpty(entry.Id)) continue;
                if (executed.Contains(entry.Id))
                {
                    // Run before a restart or a lost acknowledgement: acknowledge only.
                    toAck.Add(entry.Id);
                    continue;
                }
                if (entry.OnlineOnly && !IsOnline(entry.Player)) continue;
                foreach (var command in entry.Commands) server.Command(command);
                executed.Add(entry.Id);
                SaveExecuted();
                toAck.Add(entry.Id);
            }
            return toAck;
        }

        bool IsOnline(QueuePlayer player)
        {
            if (player == null) return false;
            foreach (var online in players.Connected)
            {
                if (!string.IsNullOrEmpty(player.SteamId) && online.Id == player.SteamId) return true;
                if (player.Name != null && string.Equals(online.Name, player.Name, StringComparison.OrdinalIgnoreCase)) return true;
            }
            return false;
        }

        void Acknowledge(List<string> ids, int nextCheck)
        {
            if (ids.Count == 0)
            {
                Finish(nextCheck);
                return;
            }
            var batch = ids.GetRange(0, Math.Min(MaxAckIds, ids.Count));
            var body = JsonConvert.SerializeObject(new AckRequest { Ids = batch });
            var headers = new Dictionary<string, string> { ["Content-Type"] = "application/json" };
            var url = config.QueueUrl + "/ack?key=" + Uri.EscapeDataString(config.ClaimKey);
            webrequest.Enqueue(url, body, (code, response) =>
            {
                if (code != 200)
                {
                    // Failure policy: retry later - the ids stay in the data file, so the next list acknowledges them without running them.
                    PrintWarning("The acknowledgement answered " + code + "; the entries run are kept and acknowledged later");
                    Finish(config.RetrySeconds);
                    return;
                }
                try
                {
                    var answer = JsonConvert.DeserializeObject<AckAnswer>(response);
                    foreach (var id in answer.Acked) executed.Remove(id);
                    foreach (var id in answer.Unknown) executed.Remove(id);
                    SaveExecuted();
                }
                catch (Exception)
                {
                    // Failure policy: keep the ids - an unreadable answer acknowledges nothing we know of; the next list tells again.
                    PrintWarning("The acknowledgement's answer is not JSON; the entries run are kept");
                }
                if (ids.Count > batch.Count) Acknowledge(ids.GetRange(batch.Count, ids.Count - batch.Count), nextCheck);
                else Finish(nextCheck);
            }, this, RequestMethod.POST, headers, 10f);
        }

        void Finish(int seconds)
        {
            secondsUntilCheck = seconds - 1;
            busy = false;
        }

        void SaveExecuted() => Interface.Oxide.DataFileSystem.WriteObject(ExecutedDataFile, new List<string>(executed));
    }
}
