import test from "ava";
import { checkCsrf, clearedSessionCookie, csrfTokenFor, readCookie, sessionCookie } from "../../gateway/dashboard/auth.js";

test("the session cookie is HttpOnly, SameSite=Strict, scoped to /dashboard, and Secure exactly when the public URL is https", (t) => {
  t.is(sessionCookie("ds_abc", 43200, false), "dashboard_session=ds_abc; Path=/dashboard; Max-Age=43200; HttpOnly; SameSite=Strict");
  t.is(sessionCookie("ds_abc", 43200, true), "dashboard_session=ds_abc; Path=/dashboard; Max-Age=43200; HttpOnly; SameSite=Strict; Secure");
  t.is(clearedSessionCookie(true), "dashboard_session=; Path=/dashboard; Max-Age=0; HttpOnly; SameSite=Strict; Secure");
});

test("readCookie finds one cookie among several and ignores look-alikes", (t) => {
  t.is(readCookie("a=1; dashboard_session=ds_x; b=2", "dashboard_session"), "ds_x");
  t.is(readCookie("xdashboard_session=ds_y", "dashboard_session"), undefined);
  t.is(readCookie(undefined, "dashboard_session"), undefined);
});

test("the CSRF token is bound to its session; checkCsrf wants it, a same-origin Origin and Sec-Fetch-Site", (t) => {
  const token = csrfTokenFor("ds_one");
  t.not(token, csrfTokenFor("ds_two"));
  t.regex(token, /^[A-Za-z0-9_-]{43}$/);
  const host = "dash.example.com";
  t.is(checkCsrf({ host, "x-csrf-token": token }, token), undefined);
  t.is(checkCsrf({ host, "x-csrf-token": token, origin: "https://dash.example.com", "sec-fetch-site": "same-origin" }, token), undefined);
  t.is(checkCsrf({ host, "x-csrf-token": csrfTokenFor("ds_two") }, token), "missing or invalid CSRF token: send X-CSRF-Token from GET /dashboard/api/session");
  t.is(checkCsrf({ host }, token), "missing or invalid CSRF token: send X-CSRF-Token from GET /dashboard/api/session");
  t.is(checkCsrf({ host, "x-csrf-token": token, origin: "https://dash.example.com.evil.io" }, token), "cross-origin request refused");
  t.is(checkCsrf({ host, "x-csrf-token": token, "sec-fetch-site": "none" }, token), "cross-site request refused");
});
