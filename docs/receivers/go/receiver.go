// Reward callback receiver for a game server: Go, standard library only (net/http, crypto/hmac).
// Run: SERVER_ID=<your server id> CALLBACK_SECRET=whsec_... PORT=8080 go run receiver.go   (see README.md)
package main

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// toleranceSeconds is the contract's replay window: refuse a signature whose t is more than 300 s from now.
const toleranceSeconds = 300

var (
	macPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	secrets    []string // one, or several during a rotation (any of them verifies)
	serverID   string   // SERVER_ID, your server's id: a callback whose server_id is another is refused
	paidFile   string   // the dedupe store: one paid heart_id per line
	fixedNow   string   // TEST ONLY: RECEIVER_NOW, a fixed "now" in unix seconds for the frozen vectors
	mu         sync.Mutex
	paid       = map[string]bool{}
)

// payReward is THE PAY HOOK: replace it with your game's reward (a console command, an RCON call, a DB insert).
func payReward(heartID, username string) error {
	fmt.Printf("PAID %s %s\n", heartID, username)
	return nil
}

func recordPaid(heartID string) error {
	f, err := os.OpenFile(paidFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString(heartID + "\n"); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	paid[heartID] = true
	return nil
}

// verify returns "ok", "malformed", "stale" or "bad_signature", checked over the raw body bytes.
func verify(rawBody []byte, header string) (string, int64) {
	var t string
	var macs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		if k == "t" {
			t = v
		}
		if k == "v1" && macPattern.MatchString(v) {
			mac, _ := hex.DecodeString(v)
			macs = append(macs, mac)
		}
	}
	tSeconds, err := strconv.ParseInt(t, 10, 64)
	if err != nil || tSeconds < 0 || len(macs) == 0 {
		return "malformed", 0
	}
	now := time.Now().Unix()
	if fixedNow != "" {
		now, _ = strconv.ParseInt(fixedNow, 10, 64)
	}
	matched := false
	for _, secret := range secrets {
		h := hmac.New(sha256.New, []byte(secret))
		h.Write([]byte(t + "."))
		h.Write(rawBody)
		expected := h.Sum(nil)
		for _, mac := range macs {
			matched = hmac.Equal(mac, expected) || matched
		}
	}
	if !matched {
		return "bad_signature", 0
	}
	if now-tSeconds > toleranceSeconds || tSeconds-now > toleranceSeconds {
		return "stale", 0
	}
	return "ok", tSeconds
}

func answer(w http.ResponseWriter, status int, body map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		answer(w, 405, map[string]any{"error": "POST the reward callback here"})
		return
	}
	rawBody, err := io.ReadAll(r.Body)
	if err != nil {
		// Failure policy: an unreadable body is a failed attempt (400); the service retries.
		answer(w, 400, map[string]any{"error": "body unreadable"})
		return
	}
	verdict, t := verify(rawBody, r.Header.Get("X-Service-Signature"))
	// Any non-2xx makes the service retry later; never answer 410 here (410 disables your callback).
	if verdict == "malformed" {
		answer(w, 400, map[string]any{"error": "missing or malformed X-Service-Signature header"})
		return
	}
	if verdict != "ok" {
		answer(w, 401, map[string]any{"error": "signature rejected: " + verdict})
		return
	}
	var event struct {
		Event     string `json:"event"`
		ServerID  string `json:"server_id"`
		HeartID   string `json:"heart_id"`
		Username  string `json:"username"`
		Timestamp *int64 `json:"timestamp"`
	}
	if err := json.Unmarshal(rawBody, &event); err != nil { // parse only after the signature checked out
		// Failure policy: a signed body that is not JSON is refused (400); the service retries.
		answer(w, 400, map[string]any{"error": "body is not valid JSON"})
		return
	}
	// Signed by the list, but for whom? Before anything is paid or recorded.
	if event.ServerID != serverID {
		answer(w, 403, map[string]any{"error": "server_id mismatch: this receiver is for server " + serverID})
		return
	}
	if event.Timestamp != nil && *event.Timestamp != t {
		answer(w, 400, map[string]any{"error": "timestamp differs from the signature's t"})
		return
	}
	switch {
	case event.Event == "heart.test":
		answer(w, 200, map[string]any{"ok": true, "test": true}) // the dashboard's test: pay nothing
		return
	case event.Event != "heart.counted":
		answer(w, 200, map[string]any{"ok": true, "ignored": event.Event})
		return
	case event.HeartID == "" || event.Username == "":
		answer(w, 400, map[string]any{"error": "heart_id and username are required"})
		return
	}
	mu.Lock() // requests run concurrently: the check, the payment and the record happen under one lock
	defer mu.Unlock()
	if paid[event.HeartID] {
		answer(w, 200, map[string]any{"ok": true, "duplicate": true}) // a retry or redelivery: already paid
		return
	}
	if err := payReward(event.HeartID, event.Username); err != nil {
		// Failure policy: not paid -> 500, so the service retries the same heart_id later.
		answer(w, 500, map[string]any{"error": "reward failed, retry later"})
		return
	}
	if err := recordPaid(event.HeartID); err != nil {
		// Failure policy: paid but not recorded -> 500 and a loud log; a retry would pay again, so fix the disk first.
		log.Printf("paid %s but could not record it: %v", event.HeartID, err)
		answer(w, 500, map[string]any{"error": "reward recorded badly, retry later"})
		return
	}
	answer(w, 200, map[string]any{"ok": true, "paid": true})
}

func main() {
	// A valid signature proves the list sent a callback; only its server_id proves it is for you: the list
	// signs every server's callbacks, so a callback for another server is refused however well it is signed.
	serverID = strings.TrimSpace(os.Getenv("SERVER_ID"))
	if serverID == "" {
		log.Fatal("set SERVER_ID=<your server's id> (dashboard, server settings): a callback for another server is refused")
	}
	for _, s := range strings.Split(os.Getenv("CALLBACK_SECRET"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			secrets = append(secrets, s)
		}
	}
	if len(secrets) == 0 {
		log.Fatal("set CALLBACK_SECRET=whsec_... (several comma-separated during a rotation)")
	}
	paidFile = os.Getenv("PAID_FILE")
	if paidFile == "" {
		paidFile = "paid-hearts.txt"
	}
	fixedNow = os.Getenv("RECEIVER_NOW")
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	if f, err := os.Open(paidFile); err == nil {
		scanner := bufio.NewScanner(f)
		for scanner.Scan() {
			if line := strings.TrimSpace(scanner.Text()); line != "" {
				paid[line] = true
			}
		}
		f.Close()
	}
	http.HandleFunc("/", handle)
	fmt.Printf("listening on http://127.0.0.1:%s (server %s)\n", port, serverID)
	log.Fatal(http.ListenAndServe("127.0.0.1:"+port, nil))
}
