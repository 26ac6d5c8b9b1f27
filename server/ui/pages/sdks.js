// The app's SDK page (docs/sdks.md; docs/ingest.md §6, "Keys for SDKs"):
// the lines that point each PostHog, Segment, Amplitude and Mixpanel SDK
// at this server, from GET /api/apps/{app}/sdk-snippets — the text `spur
// keys create --snippets` prints (server.SDKSnippets). They hold a key
// placeholder; an admin may create a new ingest key of the app here, which
// is put into the snippets and shown this once (kept in this page's state
// only, never in a URL). Under --auth none the app's name is the key.

import { html, useEffect, useState } from '../lib/html.js';
import { useApp } from '../lib/appctx.js';
import { api } from '../lib/api.js';
import { ErrorBox } from '../components/result.js';

// SDKsPage is routed at /apps/:app/sdks.
export function SDKsPage() {
  const { app } = useApp();
  const [base, setBase] = useState(location.origin);
  const [ans, setAns] = useState(null);
  const [err, setErr] = useState(null);
  const [key, setKey] = useState(null);
  const [keyErr, setKeyErr] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    setErr(null);
    api.sdkSnippets(app, base).then(setAns, setErr);
  }, [app, base]);
  useEffect(() => { setKey(null); setKeyErr(null); }, [app]);
  const create = async () => {
    setBusy(true);
    setKeyErr(null);
    try {
      setKey((await api.createKey({ scope: 'ingest', app, name: 'SDK (web UI)' })).key);
    } catch (e) {
      setKeyErr(e);
    } finally {
      setBusy(false);
    }
  };
  const code = (s) => (key && ans.placeholder ? s.code.replaceAll(ans.key, key) : s.code);
  return html`<main class="page sdks-page">
    <h1>Send events from an SDK</h1>
    <p class="hint">Apps instrumented with PostHog, Segment, Amplitude or Mixpanel send to Spur unchanged: point the SDK at this
      server with the lines below. <code>spur keys create --scope ingest --app ${app} --snippets</code> prints the same;
      docs/sdks.md says what is mapped how.</p>
    <label class="narrow-row">Server URL as the SDKs reach it
      <input aria-label="Server URL" value=${base} onChange=${(e) => setBase(e.target.value.trim())} /></label>
    ${ans && !ans.placeholder ? html`<p class="note">This server runs with <code>--auth none</code>: the SDKs send the app's name,
      <code>${ans.key}</code>, as their key.</p>`
      : key ? html`<p class="note" data-testid="new-key">A new ingest key of ${app}, shown this once — keep it now (it is in the snippets below):
          <code>${key}</code></p>`
      : html`<p class="row"><span class="note">The snippets hold the placeholder <code>${ans?.key || '…'}</code>: put an ingest key of ${app} there,
          or create one (an admin key may).</span>
          <button class="secondary" onClick=${create} disabled=${busy}>Create an ingest key</button></p>`}
    ${keyErr ? html`<${ErrorBox} err=${keyErr} />` : null}
    ${err ? html`<${ErrorBox} err=${err} />` : null}
    ${ans ? ans.snippets.map((s) => html`<section class="snippet" data-sdk=${s.sdk} aria-label=${s.sdk}>
        <h2>${s.sdk} <span class="muted">${s.language}</span></h2>
        <pre class="code"><code>${code(s)}</code></pre></section>`) : err ? null : html`<p class="loading">Loading…</p>`}
  </main>`;
}
