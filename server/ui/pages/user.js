// One user: their current properties and their trail (events in time
// order, paged, with each event's properties).

import { html, useEffect, useState } from '../lib/html.js';
import { useLocation } from '../vendor/preact-iso-router.js';
import { useApp } from '../lib/appctx.js';
import { api } from '../lib/api.js';
import { num } from '../lib/format.js';
import { ErrorBox } from '../components/result.js';
import { PropChips } from '../components/userlist.js';
import { ZonePicker } from '../components/common.js';

const LIMIT = 100;

export function UserPage({ params }) {
  const { app } = useApp();
  const loc = useLocation();
  const offset = Number(loc.query.offset) || 0;
  const tz = loc.query.tz || '';
  const [user, setUser] = useState(null);
  const [trail, setTrail] = useState(null);
  const [err, setErr] = useState(null);
  useEffect(() => { api.user(app, params.id).then(setUser, setErr); }, [app, params.id]);
  useEffect(() => { setTrail(null); api.userEvents(app, params.id, { offset, limit: LIMIT, tz }).then(setTrail, setErr); }, [app, params.id, offset, tz]);
  const url = (o, z) => `/apps/${encodeURIComponent(app)}/users/${encodeURIComponent(params.id)}?offset=${o}${z ? '&tz=' + encodeURIComponent(z) : ''}`;
  return html`<main class="page user-page">
    <h1>User <code>${params.id}</code></h1>
    ${err ? html`<${ErrorBox} err=${err} />` : null}
    <section><h2>Properties</h2>${user ? (Object.keys(user.properties).length ? html`<${PropChips} props=${user.properties} />` : html`<p class="empty">No user properties.</p>`) : '…'}</section>
    <section><h2>Trail ${trail ? html`<span class="muted">${num(trail.total)} events</span>` : null}</h2>
      <div class="row narrow-row"><${ZonePicker} value=${tz} onChange=${(z) => loc.route(url(0, z))} /></div>
      ${trail ? html`<table class="grid trail" data-testid="trail"><thead><tr><th>#</th><th>Time (${trail.tz})</th><th>Event</th><th>Properties</th></tr></thead>
        <tbody>${trail.events.map((e, i) => html`<tr><td class="num">${offset + i + 1}</td><td class="time">${e.time.replace('T', ' ')}</td>
          <td>${e.event}</td><td><${PropChips} props=${e.properties} />${e.insert_id ? html`<span class="muted"> insert_id ${e.insert_id}</span>` : null}</td></tr>`)}</tbody></table>
        <nav class="pager" aria-label="Trail pages">
          ${offset > 0 ? html`<a href=${url(Math.max(0, offset - LIMIT), tz)}>‹ Earlier</a>` : html`<span></span>`}
          <span>${trail.events.length ? `${num(offset + 1)}–${num(offset + trail.events.length)} of ${num(trail.total)}` : ''}</span>
          ${offset + LIMIT < trail.total ? html`<a href=${url(offset + LIMIT, tz)}>Later ›</a>` : html`<span></span>`}
        </nav>` : html`<p class="loading">Loading…</p>`}
    </section>
  </main>`;
}
