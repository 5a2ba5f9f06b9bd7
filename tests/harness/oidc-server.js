// oidc-server.js - a throwaway OpenID Connect provider for tally's tests.
//
// Usage: node oidc-server.js DIR PORT [TLSPORT CERT KEY]
//        (tests/harness/oidc.sh runs it)
//
// oidc-provider 8 (installed by tools/deps.sh into tests/harness/oidc/,
// never fetched at test time) on 127.0.0.1:PORT, issuer
// http://127.0.0.1:PORT.  Enabled: RFC 7591 registration with the initial
// access token in DIR/iat, RFC 7592 management (the registration access
// token rotates on every PUT), client credentials, RFC 7662
// introspection, RFC 7009 revocation.  Everything the provider stores
// lives in DIR/store.json, written on every change (a restart keeps the
// clients; the built-in memory adapter loses them and evicts after 1000).
// With TLSPORT, the same provider (the same store, keys and clients) also
// answers over https on 127.0.0.1:TLSPORT with CERT and KEY (PEM files),
// as issuer https://127.0.0.1:TLSPORT: a client that fetches the discovery
// document over TLS finds an issuer and endpoints that are https.
// Authorization requests are answered by a scripted login (see the
// interaction below): the account login_hint names signs in and consents.
// A token whose client was deleted is not found (introspection says
// inactive), as Keycloak behaves.  Who may introspect what is left at
// oidc-provider's default (features.introspection.allowedPolicy: any
// authenticated client, any token), as a deployment that did not change
// it: tests/integration/27_oidc_introspection.sh shows what that allows.
//
// TALLY_OIDC_HOSTILE_CLIENT_ID (in the environment oidc.sh start runs
// in): the client id that registration answers, byte for byte (a hostile
// or buggy provider's: newlines and all) for the first client, with
// "-2", "-3", ... after it for the next; the provider itself keeps ids
// it can use (it refuses such a client_id), and the management answers
// (RFC 7592) name the client by the hostile id too; DIR/hostile counts
// the registrations so answered.
'use strict';
const fs = require('fs');
const https = require('https');
const path = require('path');
const { pathToFileURL } = require('url');

const [dir, port, tlsPort, certFile, keyFile] = process.argv.slice(2);
if (!dir || !port || (tlsPort && (!certFile || !keyFile))) {
  process.stderr.write('usage: node oidc-server.js DIR PORT [TLSPORT CERT KEY]\n');
  process.exit(2);
}
const iat = fs.readFileSync(path.join(dir, 'iat'), 'utf8').trim();
const storeFile = path.join(dir, 'store.json');
let store = {};
try { store = JSON.parse(fs.readFileSync(storeFile, 'utf8')); } catch (e) { store = {}; }

function now() { return Math.floor(Date.now() / 1000); }
function save() {
  const tmp = storeFile + '.tmp';
  fs.writeFileSync(tmp, JSON.stringify(store), { mode: 0o600 });
  fs.renameSync(tmp, storeFile);
}
function live(key) {
  const e = store[key];
  if (!e) return undefined;
  if (e.exp && e.exp <= now()) { delete store[key]; return undefined; }
  return e;
}

// Tokens of a deleted client are gone with it.
const ofClient = new Set(['AccessToken', 'ClientCredentials', 'RefreshToken']);

class FileAdapter {
  constructor(model) { this.model = model; }
  key(id) { return `${this.model}:${id}`; }
  async upsert(id, payload, expiresIn) {
    store[this.key(id)] = { p: payload, exp: expiresIn ? now() + expiresIn : 0 };
    if (payload.userCode) store[`userCode:${payload.userCode}`] = { p: id, exp: 0 };
    if (payload.uid) store[`uid:${payload.uid}`] = { p: id, exp: 0 };
    save();
  }
  async find(id) {
    const e = live(this.key(id));
    if (!e) return undefined;
    if (ofClient.has(this.model) && e.p.clientId && !live(`Client:${e.p.clientId}`))
      return undefined;
    return e.p;
  }
  async findByUid(uid) { const e = live(`uid:${uid}`); return e ? this.find(e.p) : undefined; }
  async findByUserCode(c) { const e = live(`userCode:${c}`); return e ? this.find(e.p) : undefined; }
  async consume(id) { const e = live(this.key(id)); if (e) { e.p.consumed = now(); save(); } }
  async destroy(id) { delete store[this.key(id)]; save(); }
  async revokeByGrantId(grantId) {
    for (const k of Object.keys(store))
      if (store[k].p && store[k].p.grantId === grantId) delete store[k];
    save();
  }
}

const hostile = process.env.TALLY_OIDC_HOSTILE_CLIENT_ID;
let registered = 0;

(async () => {
  const entry = path.join(__dirname, 'oidc', 'node_modules', 'oidc-provider', 'lib', 'index.js');
  const { default: Provider } = await import(pathToFileURL(entry).href);
  const issuer = `http://127.0.0.1:${port}`;
  const shown = new Map(); // the hostile ids, shared by both listeners
  const makeProvider = (iss) => {
    const provider = new Provider(iss, {
      adapter: FileAdapter,
      clients: [],
      // RFC 7591's software_id is kept and returned (tally's grant id).
      extraClientMetadata: { properties: ['software_id'] },
      features: {
        devInteractions: { enabled: false },
        registration: { enabled: true, initialAccessToken: iat },
        registrationManagement: { enabled: true, rotateRegistrationAccessToken: true },
        clientCredentials: { enabled: true },
        introspection: { enabled: true },
        revocation: { enabled: true },
      },
      ttl: { ClientCredentials: 600, AccessToken: 600 },
      jwks: JSON.parse(fs.readFileSync(path.join(dir, 'jwks.json'), 'utf8')),
      cookies: { keys: [iat] },
    });
    if (hostile !== undefined) {
      provider.use(async (ctx, next) => {
        await next();
        const b = ctx.body;
        if (!ctx.path.startsWith('/reg') || !b || typeof b !== 'object' || !b.client_id) return;
        if (ctx.method === 'POST' && ctx.status === 201) {
          shown.set(b.client_id, ++registered === 1 ? hostile : `${hostile}-${registered}`);
          fs.writeFileSync(path.join(dir, 'hostile'), `${registered}\n`);
        }
        if (shown.has(b.client_id)) ctx.body = { ...b, client_id: shown.get(b.client_id) };
      });
    }
    // The login interaction, scripted: whoever follows an authorization
    // request's redirects is signed in as the account login_hint names
    // (alice without one) and consents to what the client asked for, so a
    // real client completes an authorization-code flow with no page
    // (tests/harness/oidc-rp.js).
    provider.use(async (ctx, next) => {
      if (!ctx.path.startsWith('/interaction/')) return next();
      const it = await provider.interactionDetails(ctx.req, ctx.res);
      const { prompt, params, session } = it;
      if (prompt.name === 'login') {
        const accountId = /^[a-z]{1,32}$/.test(params.login_hint || '') ? params.login_hint : 'alice';
        return provider.interactionFinished(ctx.req, ctx.res, { login: { accountId } },
          { mergeWithLastSubmission: false });
      }
      const grant = it.grantId ? await provider.Grant.find(it.grantId)
        : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
      const d = prompt.details;
      if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
      if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
      for (const [ind, sc] of Object.entries(d.missingResourceScopes || {}))
        grant.addResourceScope(ind, sc.join(' '));
      const grantId = await grant.save();
      return provider.interactionFinished(ctx.req, ctx.res, { consent: { grantId } },
        { mergeWithLastSubmission: true });
    });
    provider.on('server_error', (ctx, err) => process.stderr.write(`server_error: ${err.stack}\n`));
    return provider;
  };
  const servers = [];
  const listening = (server) => new Promise((resolve, reject) => {
    server.once('error', reject);
    server.once('listening', resolve);
  });
  const plain = makeProvider(issuer).listen(Number(port), '127.0.0.1');
  servers.push(plain);
  await listening(plain);
  let tlsBound = '';
  if (tlsPort) {
    // Bound before its provider exists: with TLSPORT 0 the kernel picks a
    // port no socket holds, and the issuer names the port it picked.
    const tls = https.createServer({
      cert: fs.readFileSync(certFile), key: fs.readFileSync(keyFile),
    });
    servers.push(tls);
    tls.listen(Number(tlsPort), '127.0.0.1');
    await listening(tls);
    tlsBound = String(tls.address().port);
    tls.on('request', makeProvider(`https://127.0.0.1:${tlsBound}`).callback());
  }
  fs.writeFileSync(path.join(dir, 'ready'), `${issuer}\n${tlsBound}\n`);
  let open = servers.length;
  const stop = () => servers.forEach((sv) => sv.close(() => { if (--open === 0) process.exit(0); }));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
})().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });
