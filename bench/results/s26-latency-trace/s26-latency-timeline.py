import sys, re, glob, statistics as st, os
d = sys.argv[1]
UU = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')
LINE = re.compile(r'^(\d+)\s+([\d.]+)\s+(\w+)\((\d+),(.*)$')
def load(pattern):
    ev = []
    for f in glob.glob(os.path.join(d, pattern)):
        for l in open(f, errors='replace'):
            m = LINE.match(l)
            if m: ev.append((float(m.group(2)), m.group(3), int(m.group(4)), m.group(5), int(m.group(1))))
    ev.sort(key=lambda e: e[0]); return ev
ref, rel, dlv, rcv = load('referral-service.*.st'), load('relay.*.st'), load('delivery.*.st'), load('receiver-child.*.st')
def first(ev, pred, after=0.0):
    for e in ev:
        if e[0] >= after and pred(e): return e
    return None
isread = lambda e: e[1] in ('read', 'recvfrom', 'recvmsg', 'readv')
iswrite = lambda e: e[1] in ('write', 'writev', 'sendto', 'sendmsg')
hearts = []
for e in rcv:
    if isread(e):
        for h in UU.findall(e[3]):
            if 'heart' in e[3] and h not in [x[0] for x in hearts]: hearts.append((h, e[0]))
rows = []
for h, arrived in hearts:
    w2 = first(ref, lambda e: iswrite(e) and h in e[3])           # cast's write statement sent
    if not w2: continue
    fd = w2[2]
    # the read statement: the previous write on the same PG fd; the RPC in: the previous read on another fd
    prev = [e for e in ref if e[0] < w2[0]]
    w1 = next((e for e in reversed(prev) if iswrite(e) and e[2] == fd), None)
    rin = next((e for e in reversed(prev) if isread(e) and e[2] != fd and e[0] < (w1[0] if w1 else w2[0])), None)
    r2 = first(ref, lambda e: isread(e) and e[2] == fd, w2[0])    # write statement's answer (after its commit)
    rout = first(ref, lambda e: iswrite(e) and e[2] != fd and h in e[3], w2[0])  # RPC answer
    notif = first(rel, lambda e: isread(e) and 'outbox_committed' in e[3], w2[0])
    rbegin = first(rel, lambda e: iswrite(e) and e[2] != (notif[2] if notif else -1), notif[0] if notif else w2[0])
    prod = first(rel, lambda e: iswrite(e) and h in e[3], w2[0])
    ack = first(rel, lambda e: isread(e) and e[2] == prod[2], prod[0]) if prod else None
    kin = first(dlv, lambda e: isread(e) and h in e[3], w2[0])
    ins = first(dlv, lambda e: iswrite(e) and h in e[3], kin[0]) if kin else None
    insr = first(dlv, lambda e: isread(e) and e[2] == ins[2], ins[0]) if ins else None
    post = first(dlv, lambda e: iswrite(e) and h in e[3] and e[2] != ins[2], ins[0]) if ins else None
    rcv1 = first(rcv, lambda e: isread(e) and h in e[3], w2[0])
    t = lambda e: e[0] if e else float('nan')
    rows.append(dict(rpc_in=t(rin), read_stmt=t(w1), write_stmt=t(w2), write_done=t(r2), rpc_out=t(rout), relay_notified=t(notif), relay_first_write=t(rbegin), produce=t(prod), produce_ack=t(ack), consumer_fetch=t(kin), insert_sent=t(ins), insert_done=t(insr), post_sent=t(post), receiver=t(rcv1)))
keys = list(rows[0].keys()) if rows else []
print(f"{len(rows)} hearts; medians of each step's time since the previous one (ms), and since rpc_in")
for i, k in enumerate(keys):
    if i == 0: continue
    step = [ (r[k]-r[keys[i-1]])*1000 for r in rows if r[k]==r[k] and r[keys[i-1]]==r[keys[i-1]] ]
    tot = [ (r[k]-r['rpc_in'])*1000 for r in rows if r[k]==r[k] and r['rpc_in']==r['rpc_in'] ]
    if step: print(f"  {keys[i-1]:>18} -> {k:<18} {st.median(step):7.2f}   total {st.median(tot):7.2f}  (n={len(step)})")
print("medians relative to write_stmt (ms):")
for k in keys:
    v = [ (r[k]-r['write_stmt'])*1000 for r in rows if r[k]==r[k] ]
    if v: print(f"  {k:<18} {st.median(v):8.2f}  p25 {sorted(v)[len(v)//4]:7.2f} p75 {sorted(v)[3*len(v)//4]:7.2f} (n={len(v)})")
pairs = [("rpc_in","read_stmt"),("read_stmt","write_stmt"),("write_stmt","write_done"),("write_done","rpc_out"),("write_done","relay_notified"),("relay_notified","relay_first_write"),("relay_first_write","produce"),("produce","produce_ack"),("produce","consumer_fetch"),("produce_ack","consumer_fetch"),("consumer_fetch","insert_sent"),("insert_sent","insert_done"),("insert_done","receiver"),("write_stmt","receiver")]
print("per-heart deltas, median (p25-p75) ms:")
for a,b in pairs:
    v = sorted((r[b]-r[a])*1000 for r in rows if r[a]==r[a] and r[b]==r[b] and -50 < (r[b]-r[a])*1000 < 200)
    if v: print(f"  {a:>18} -> {b:<18} {st.median(v):6.2f} ({v[len(v)//4]:.2f}-{v[3*len(v)//4]:.2f}) n={len(v)}")
