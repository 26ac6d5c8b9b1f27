// One person (docs/identity.md §1), by any of its distinct ids: its person id,
// all of its distinct ids (the one in the URL marked), its current
// properties and its one merged trail (events in time order, paged, each
// with its properties and, for a person of several ids, the distinct id
// it was sent with). Against a server before persons the answers lack
// person_id, distinct_ids and distinct_id: the page shows the id asked,
// its properties and its trail.

import { html, useEffect, useState } from '../lib/html.js';
import { useLocation } from '../vendor/preact-iso-router.js';
import { useApp } from '../lib/appctx.js';
import { api } from '../lib/api.js';
import { num } from '../lib/format.js';
import { ErrorBox } from '../components/result.js';
import { PropChips, personURL } from '../components/userlist.js';
import { ZonePicker } from '../components/common.js';

const LIMIT = 100;

// PersonPage is routed at /apps/:app/persons/:id and /apps/:app/users/:id
// (params.id: any distinct id of the person); ?offset=N&tz=ZONE page the
// trail. Another id is another page (nothing of the last one shows while
// it loads).
export const PersonPage = ({ params }) => html`<${Person} key=${`${params.app}\n${params.id}`} params=${params} />`;

function Person({ params }) {
  const { app } = useApp();
  const loc = useLocation();
  const offset = Number(loc.query.offset) || 0;
  const tz = loc.query.tz || '';
  const [person, setPerson] = useState(null);
  const [trail, setTrail] = useState(null);
  const [err, setErr] = useState(null);
  useEffect(() => { setPerson(null); setErr(null); api.person(app, params.id).then(setPerson, setErr); }, [app, params.id]);
  useEffect(() => { setTrail(null); api.personEvents(app, params.id, { offset, limit: LIMIT, tz }).then(setTrail, setErr); }, [app, params.id, offset, tz]);
  const url = (o, z) => `${loc.path}?offset=${o}${z ? '&tz=' + encodeURIComponent(z) : ''}`;
  const pid = person?.person_id || trail?.person_id || person?.user_id || params.id;
  const ids = person?.distinct_ids || trail?.distinct_ids || [];
  const several = ids.length > 1;
  return html`<main class="page user-page person-page">
    <h1>Person <code data-testid="person-id">${pid}</code></h1>
    ${several ? html`<p class="distinct-ids">${ids.length} distinct ids:
      <span class="chips" data-testid="distinct-ids">${ids.map((id) => (id === params.id
        ? html`<span class="chip-id here" data-id=${id} aria-current="true" title="the id in this page's address">${id}</span>`
        : html`<a class="chip-id" data-id=${id} href=${personURL(app, id)}>${id}</a>`))}</span></p>` : null}
    ${!several && pid !== params.id ? html`<p class="muted">Found by distinct id <code>${params.id}</code>.</p>` : null}
    ${err ? html`<${ErrorBox} err=${err} />` : null}
    <section><h2>Properties</h2>${person ? (Object.keys(person.properties || {}).length ? html`<${PropChips} props=${person.properties} />` : html`<p class="empty">No person properties.</p>`) : '…'}</section>
    <section><h2>Trail ${trail ? html`<span class="muted">${num(trail.total)} events${several ? ` of ${ids.length} distinct ids` : ''}</span>` : null}</h2>
      <div class="row narrow-row"><${ZonePicker} value=${tz} onChange=${(z) => loc.route(url(0, z))} /></div>
      ${trail ? html`<table class="grid trail" data-testid="trail"><thead><tr><th>#</th><th>Time (${trail.tz})</th>${several ? html`<th>Distinct id</th>` : null}<th>Event</th><th>Properties</th></tr></thead>
        <tbody>${trail.events.map((e, i) => html`<tr><td class="num">${offset + i + 1}</td><td class="time">${e.time.replace('T', ' ')}</td>
          ${several ? html`<td class="distinct-id">${e.distinct_id ?? ''}</td>` : null}
          <td>${e.event}</td><td><${PropChips} props=${e.properties} />${e.insert_id ? html`<span class="muted"> insert_id ${e.insert_id}</span>` : null}</td></tr>`)}</tbody></table>
        <nav class="pager" aria-label="Trail pages">
          ${offset > 0 ? html`<a href=${url(Math.max(0, offset - LIMIT), tz)}>‹ Earlier</a>` : html`<span></span>`}
          <span>${trail.events.length ? `${num(offset + 1)}–${num(offset + trail.events.length)} of ${num(trail.total)}` : ''}</span>
          ${offset + LIMIT < trail.total ? html`<a href=${url(offset + LIMIT, tz)}>Later ›</a>` : html`<span></span>`}
        </nav>` : html`<p class="loading">Loading…</p>`}
    </section>
  </main>`;
}
