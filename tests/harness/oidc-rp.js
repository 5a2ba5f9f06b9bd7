// oidc-rp.js - a real relying party (npm openid-client 5, installed by
// tools/deps.sh into tests/harness/oidc/) signing a user in with the
// authorization-code flow and PKCE (S256), as a web application would
// with the values tally delivered.
//
// Usage: node oidc-rp.js ISSUER CLIENT_ID CLIENT_SECRET REDIRECT_URI
//        AUTH_METHOD [wrong-verifier]
//
// The fixture's scripted login (oidc-server.js) stands in for the
// user: the authorization request's redirects are followed with the
// cookies they set until the provider sends the browser to
// REDIRECT_URI with a code, which is then exchanged at the token
// endpoint with the client's secret (AUTH_METHOD) and the PKCE
// verifier; with the refresh token that offline_access brings (a client
// whose grant types name refresh_token), a refresh.  Prints one line of
// JSON: {"ok":true,"sub":...,"id_token":true,"access_token":true,
// "refreshed":true|false} and exits 0; or {"ok":false,
// "error":...} and exits 1.  With wrong-verifier the exchange sends
// another verifier than the one the challenge was made from, and must
// be refused.
'use strict';
const path = require('path');

const [iss, clientId, secret, redirect, method, mode] = process.argv.slice(2);
if (!iss || !clientId || !secret || !redirect || !method) {
  process.stderr.write('usage: node oidc-rp.js ISSUER CLIENT_ID CLIENT_SECRET REDIRECT_URI AUTH_METHOD [wrong-verifier]\n');
  process.exit(2);
}
const { Issuer, generators } = require(path.join(__dirname, 'oidc', 'node_modules', 'openid-client'));

const done = (o) => { process.stdout.write(`${JSON.stringify(o)}\n`); process.exit(o.ok ? 0 : 1); };

(async () => {
  const issuer = await Issuer.discover(iss);
  const client = new issuer.Client({
    client_id: clientId, client_secret: secret, redirect_uris: [redirect],
    response_types: ['code'], token_endpoint_auth_method: method,
  });
  const verifier = generators.codeVerifier();
  const state = generators.state();
  const nonce = generators.nonce();
  // offline_access (with the consent it needs): a refresh token, for
  // a client whose grant types name refresh_token.
  let url = client.authorizationUrl({
    scope: 'openid offline_access', prompt: 'consent', state, nonce, login_hint: 'alice',
    code_challenge: generators.codeChallenge(verifier), code_challenge_method: 'S256',
  });
  const jar = new Map();
  for (let hop = 0; hop < 12; hop++) {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    for (const c of res.headers.getSetCookie()) {
      const [kv] = c.split(';');
      const i = kv.indexOf('=');
      jar.set(kv.slice(0, i).trim(), kv.slice(i + 1));
    }
    const loc = res.headers.get('location');
    if (!loc) done({ ok: false, error: `HTTP ${res.status} at ${url.split('?')[0]} without a redirect: ${(await res.text()).slice(0, 300)}` });
    url = new URL(loc, url).href;
    if (url.startsWith(redirect)) {
      const params = client.callbackParams(url);
      if (params.error) done({ ok: false, error: `${params.error}: ${params.error_description || ''}` });
      const tokens = await client.callback(redirect, params, {
        code_verifier: mode === 'wrong-verifier' ? generators.codeVerifier() : verifier, state, nonce,
      });
      let refreshed = false;
      if (tokens.refresh_token) {
        const again = await client.refresh(tokens.refresh_token);
        refreshed = !!again.access_token && again.access_token !== tokens.access_token;
      }
      return done({ ok: true, sub: tokens.claims().sub, id_token: !!tokens.id_token,
        access_token: !!tokens.access_token, refreshed });
    }
  }
  done({ ok: false, error: 'no code after 12 redirects' });
})().catch((e) => done({ ok: false, error: `${e.name}: ${e.error || ''} ${e.error_description || e.message}` }));
