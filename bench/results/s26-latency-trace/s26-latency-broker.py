import sys, re, json, datetime, os, statistics as st
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 's26-latency-timeline.py')).read().split('keys = list')[0].replace("d = sys.argv[1]", "d = sys.argv[1]"))
log = sys.argv[2]
prods, fetches = [], []
for l in open(log):
    m = re.match(r'\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] DEBUG Completed request:(\{.*\}) \(kafka', l)
    if not m: continue
    t = datetime.datetime.strptime(m.group(1), '%Y-%m-%d %H:%M:%S,%f').replace(tzinfo=datetime.timezone.utc).timestamp()
    d = json.loads(m.group(2)); k = d['requestHeader']['requestApiKeyName']
    if k == 'PRODUCE' and d['request']['topicData'][0]['name'].startswith('hearts'):
        pr = d['response']['responses'][0]['partitionResponses'][0]
        prods.append((t, pr['index'], pr['baseOffset'], d))
    elif k == 'FETCH' and d['request']['replicaId'] == -1:
        for r in d['response']['responses']:
            for p in r['partitions']:
                if p['recordsSizeInBytes'] > 0 and r['topic'].startswith('hearts'): fetches.append((t, p['partitionIndex'], p['highWatermark'], d))
res = []
for r in rows:
    if r['produce'] != r['produce']: continue
    # broker produce completion: first produce completed after the relay's write
    bp = next((p for p in prods if p[0] >= r['produce'] - 0.001), None)
    if not bp: continue
    bf = next((f for f in fetches if f[1] == bp[1] and f[2] > bp[2] and f[0] >= bp[0] - 0.005), None)
    if not bf: continue
    res.append(dict(
        relay_write_to_broker_produce_done=(bp[0]-r['produce'])*1000,
        broker_produce_total=bp[3]['totalTimeMs'],
        broker_produce_done_to_relay_ack_read=(r['produce_ack']-bp[0])*1000,
        broker_fetch_done_minus_produce_done=(bf[0]-bp[0])*1000,
        broker_fetch_done_to_consumer_read=(r['consumer_fetch']-bf[0])*1000,
        fetch_responseQueue=bf[3]['responseQueueTimeMs'], fetch_send=bf[3]['sendTimeMs']))
print(len(res), "hearts matched; medians (ms; the broker's log clock has 1 ms resolution)")
for k in (res[0].keys() if res else []):
    v = sorted(x[k] for x in res); print(f"  {k:<40} {st.median(v):6.2f} ({v[len(v)//4]:.2f}-{v[3*len(v)//4]:.2f})")
