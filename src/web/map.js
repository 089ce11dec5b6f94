// The pages' map: the live map of /map (#map) and the location map of a device page
// (#device-map). Leaflet is loaded before this script; every setting comes from data attributes
// the server wrote, and the AQI bands and colours from the legend's items.
//
// The live map polls the clusters feed for the visible box at the current zoom: a few hundred
// features for any fleet, drawn on one canvas (not one SVG element per marker). A cluster is a
// circle sized by its count and labelled with it, filled with its median AQI's colour and ringed
// with its highest AQI's, grey when all its devices are offline; a click zooms into it. A single
// device is a marker with its popup, as on the map feed.
(function () {
  'use strict';

  var live = document.getElementById('map');
  var single = document.getElementById('device-map');
  var status = document.getElementById('map-status');

  function say(text) {
    if (status) { status.textContent = text; }
  }

  if (typeof L === 'undefined') {
    say('The map library could not be loaded.');
    return;
  }

  var bands = Array.prototype.map.call(
    document.querySelectorAll('#legend [data-lowest]'),
    function (item) {
      return { lowest: Number(item.dataset.lowest), colour: item.dataset.colour, name: item.dataset.name };
    }
  );

  function band(aqi) {
    var found = bands[0] || { colour: '#999999', name: '' };
    bands.forEach(function (b) { if (aqi >= b.lowest) { found = b; } });
    return found;
  }

  // An offline device's values are its last ones, not the air now: grey, as on its page and badge.
  var offline = document.querySelector('#legend [data-offline]');
  var offlineColour = offline ? offline.dataset.colour : '#9f9f9f';

  function colourOf(p) {
    return p.status === 'offline' ? offlineColour : band(p.aqi).colour;
  }

  function tiles(element) {
    return L.tileLayer(element.dataset.tiles, { attribution: element.dataset.attribution, maxZoom: 19 });
  }

  function markerStyle(colour) {
    return { radius: 8, color: '#1d2430', weight: 1, fillColor: colour, fillOpacity: 0.9 };
  }

  if (single) {
    var at = [Number(single.dataset.lat), Number(single.dataset.lon)];
    var small = L.map(single, { scrollWheelZoom: false }).setView(at, 13);
    tiles(single).addTo(small);
    L.circleMarker(at, markerStyle(single.dataset.colour)).addTo(small);
  }

  if (!live) { return; }

  var params = new URLSearchParams(window.location.search);
  var view = [Number(params.get('lat')), Number(params.get('lon')), Number(params.get('zoom'))];
  var hasView = params.has('lat') && params.has('lon') && view.every(isFinite);
  // Leaflet's canvas renderer, which also writes a cluster's count inside its circle (the text is
  // drawn right after the circle, so it is repainted and hit-tested with it).
  var Labelled = L.Canvas.extend({
    _updateCircle: function (layer) {
      L.Canvas.prototype._updateCircle.call(this, layer);
      var label = layer.options.label;
      if (!label || !this._drawing || layer._empty()) { return; }
      var ctx = this._ctx;
      var p = layer._point;
      ctx.save();
      ctx.font = 'bold 11px sans-serif';
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      ctx.lineWidth = 3;
      ctx.strokeStyle = 'rgba(255, 255, 255, 0.85)';
      ctx.strokeText(label, p.x, p.y);
      ctx.fillStyle = '#1d2430';
      ctx.fillText(label, p.x, p.y);
      ctx.restore();
    }
  });
  var renderer = typeof L.Canvas.prototype._updateCircle === 'function' ? new Labelled() : L.canvas();
  var map = L.map(live, { worldCopyJump: true, preferCanvas: true, renderer: renderer });
  if (hasView) {
    map.setView([view[0], view[1]], params.has('zoom') ? view[2] : 12);
  } else {
    map.setView([20, 0], 2);
  }
  tiles(live).addTo(map);

  var embedded = live.hasAttribute('data-embedded');
  var pollMs = Number(live.dataset.pollMs) || 5000;
  // Single devices by id (kept across polls, so an open popup stays open), clusters by position.
  var markers = new Map();
  var groups = [];
  var inView = 0;
  var etag = null;
  var etagUrl = null;
  var timer = null;
  var polls = 0;

  // The pages' one rounding rule (src/web/text.rs, `decimal`): half away from zero on the
  // value's shortest decimal form (what the JSON says), never a negative zero. toFixed rounds
  // the binary value instead (12.25 and 0.15 differ) and keeps "-0.0".
  function decimal(value, places) {
    if (!isFinite(value)) { return '–'; }
    var shortest = String(Math.abs(value));
    var out;
    if (/e/.test(shortest)) {
      // Beyond what String writes in plain digits (under 1e-6): nothing to round but zeros.
      out = Math.abs(value).toFixed(places);
    } else {
      var parts = shortest.split('.');
      var fraction = parts[1] || '';
      var kept = (fraction + new Array(places + 1).join('0')).slice(0, places);
      var digits = (parts[0] + kept).split('').map(Number);
      if (fraction.length > places && fraction.charCodeAt(places) >= 53) {
        var i = digits.length - 1;
        while (i >= 0 && digits[i] === 9) { digits[i] = 0; i -= 1; }
        if (i < 0) { digits.unshift(1); } else { digits[i] += 1; }
      }
      var whole = digits.length - places;
      out = digits.slice(0, whole).join('') + (places > 0 ? '.' + digits.slice(whole).join('') : '');
    }
    return (value < 0 && /[1-9]/.test(out) ? '-' : '') + out;
  }

  function field(list, label, value, name) {
    var dt = document.createElement('dt');
    dt.textContent = label;
    var dd = document.createElement('dd');
    dd.textContent = value;
    dd.dataset.field = name;
    list.appendChild(dt);
    list.appendChild(dd);
  }

  // Every time on the pages in one zone, said: UTC, minutes, as the device page writes them
  // ("2026-11-28 05:20 UTC"), whatever the browser's zone.
  function utc(instant) {
    var at = new Date(instant);
    if (isNaN(at.getTime())) { return '–'; }
    return at.toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
  }

  // A device's current snapshot (the public current route: the means of the last hour, as on
  // its page) by id, with its ETag; asked for when its popup opens, not on every poll.
  var currents = new Map();

  function currentUrl(id) {
    return '/api/v1/public/devices/' + encodeURIComponent(id) + '/current';
  }

  // Writes a snapshot (or why there is none) into a popup's hour fields.
  function fillCurrent(root, current) {
    function set(name, text) {
      var dd = root.querySelector('[data-field="' + name + '"]');
      if (dd) { dd.textContent = text; }
    }
    if (!current) {
      set('aqi', 'could not be loaded');
      return;
    }
    set('aqi', current.aqi + ' · ' + (current.status === 'offline' ? 'offline' : band(current.aqi).name));
    set('pm2_5', decimal(current.pm2_5, 1) + ' µg/m³');
    set('temperature', decimal(current.temperature, 1) + ' °C');
    set('status', current.status);
    set('last_seen', utc(current.last_seen));
    set('sample_count', current.sample_count + (current.sample_count === 1 ? ' reading' : ' readings'));
    root.dataset.current = 'loaded';
  }

  // Fetches device `id`'s current snapshot (revalidated with its ETag) and writes it into `root`.
  function loadCurrent(id, root) {
    var known = currents.get(id);
    var headers = { Accept: 'application/json' };
    if (known) { headers['If-None-Match'] = known.etag; }
    fetch(currentUrl(id), { headers: headers, cache: 'no-store' })
      .then(function (response) {
        if (response.status === 304 && known) { return known.data; }
        if (!response.ok) { throw new Error('the current snapshot answered ' + response.status); }
        var etag = response.headers.get('ETag');
        return response.json().then(function (body) {
          if (etag) { currents.set(id, { etag: etag, data: body.data }); }
          return body.data;
        });
      })
      .then(function (current) { fillCurrent(root, current); })
      .catch(function () { fillCurrent(root, known ? known.data : null); });
  }

  // Built from nodes and textContent: a device name is user input and never markup.
  // The popup shows what the device's page shows (the means of the last hour from the public
  // current snapshot, fetched when it opens) and, apart and labelled, the latest located reading
  // the map feed carries, which is what the marker's colour shows.
  function popup(p) {
    var root = document.createElement('div');
    root.className = 'airq-popup';
    // The name is user text that may hold right-to-left letters or bidi controls: in a <bdi>,
    // without the controls that open or close a scope, so it cannot reorder the popup's text
    // (as the pages do, src/web/text.rs).
    var title = document.createElement('h3');
    var name = document.createElement('bdi');
    name.textContent = String(p.name).replace(/[\u202A-\u202E\u2066-\u2069]/g, '');
    title.appendChild(name);
    title.dataset.field = 'name';
    root.appendChild(title);
    var hour = document.createElement('dl');
    field(hour, 'AQI, mean of the last hour', '…', 'aqi');
    field(hour, 'PM2.5, mean', '…', 'pm2_5');
    field(hour, 'Temperature, mean', '…', 'temperature');
    field(hour, 'Over', '…', 'sample_count');
    field(hour, 'Status', p.status, 'status');
    field(hour, 'Last reading', '…', 'last_seen');
    root.appendChild(hour);
    var latest = document.createElement('dl');
    latest.className = 'latest';
    field(latest, 'Marker: latest reading', p.aqi + ' · ' + band(p.aqi).name, 'latest_aqi');
    field(latest, 'Measured', utc(p.measured_at), 'measured_at');
    root.appendChild(latest);
    var link = document.createElement('a');
    link.href = '/devices/' + encodeURIComponent(p.id);
    link.textContent = 'History and downloads';
    if (embedded) { link.target = '_blank'; link.rel = 'noopener'; }
    root.appendChild(link);
    var known = currents.get(p.id);
    if (known) { fillCurrent(root, known.data); }
    return root;
  }

  // The visible box, widened to a grid that grows with the view (so that many viewers of
  // nearly the same view share the server's cached variant), or null for the whole world.
  function bbox() {
    var b = map.getBounds();
    var west = b.getWest();
    var east = b.getEast();
    var south = Math.max(-90, b.getSouth());
    var north = Math.min(90, b.getNorth());
    if (east - west >= 360) { return null; }
    var span = Math.max(east - west, north - south, 1e-6);
    var step = Math.pow(10, Math.floor(Math.log10(span / 4)));
    var digits = Math.max(0, -Math.floor(Math.log10(step)));
    west = Math.floor(west / step) * step;
    east = Math.ceil(east / step) * step;
    south = Math.max(-90, Math.floor(south / step) * step);
    north = Math.min(90, Math.ceil(north / step) * step);
    if (east - west >= 360) { return null; }
    function wrap(lon) {
      return (lon < -180 || lon > 180) ? ((lon + 180) % 360 + 360) % 360 - 180 : lon;
    }
    return [wrap(west), south, wrap(east), north].map(function (v) { return v.toFixed(digits); }).join(',');
  }

  // The map's zoom as the feed takes it: an integer from 0 to 22.
  function zoomLevel() {
    return Math.max(0, Math.min(22, Math.round(map.getZoom())));
  }

  function feedUrl() {
    var box = bbox();
    return live.dataset.feed + '?zoom=' + zoomLevel() + (box ? '&bbox=' + box : '');
  }

  // A cluster's circle grows with the logarithm of its count: 2 devices 12 px, 10,000 30 px.
  function clusterStyle(p) {
    var allOffline = p.offline === p.count;
    return {
      radius: Math.min(30, 10 + 5 * Math.log10(p.count)),
      color: allOffline ? offlineColour : band(p.aqi_max).colour,
      weight: 3,
      opacity: 1,
      fillColor: allOffline ? offlineColour : band(p.aqi_median).colour,
      fillOpacity: 0.85,
      label: p.count < 1000 ? String(p.count) : decimal(p.count / 1000, 1) + 'k'
    };
  }

  function showCluster(feature) {
    var p = feature.properties;
    var at = L.latLng(feature.geometry.coordinates[1], feature.geometry.coordinates[0]);
    var circle = L.circleMarker(at, clusterStyle(p)).addTo(map);
    circle.airq = { count: p.count, aqi_max: p.aqi_max, aqi_median: p.aqi_median, offline: p.offline };
    // Into the cluster: two zoom levels closer splits its 64-pixel cell into 16.
    circle.on('click', function () {
      map.setView(at, Math.min(map.getMaxZoom(), zoomLevel() + 2));
    });
    groups.push(circle);
  }

  function show(collection) {
    var seen = new Set();
    groups.forEach(function (circle) { circle.remove(); });
    groups = [];
    inView = 0;
    collection.features.forEach(function (feature) {
      var p = feature.properties;
      inView += p.count;
      if (p.count !== 1) {
        showCluster(feature);
        return;
      }
      var at = [feature.geometry.coordinates[1], feature.geometry.coordinates[0]];
      seen.add(p.id);
      var marker = markers.get(p.id);
      if (!marker) {
        marker = L.circleMarker(at, markerStyle(colourOf(p))).addTo(map);
        marker.bindPopup('');
        // Opening a popup asks for the device's current snapshot (the hour's mean).
        marker.on('popupopen', function () {
          loadCurrent(this.airq.id, this.getPopup().getContent());
        });
        markers.set(p.id, marker);
      } else {
        marker.setLatLng(at);
        marker.setStyle(markerStyle(colourOf(p)));
      }
      marker.setPopupContent(popup(p));
      if (marker.isPopupOpen()) { loadCurrent(p.id, marker.getPopup().getContent()); }
      marker.airq = { count: 1, id: p.id, aqi: p.aqi, status: p.status };
    });
    markers.forEach(function (marker, id) {
      if (!seen.has(id)) {
        marker.remove();
        markers.delete(id);
      }
    });
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(poll, pollMs);
  }

  function poll() {
    clearTimeout(timer);
    var url = feedUrl();
    var headers = { Accept: 'application/geo+json' };
    if (etag && etagUrl === url) { headers['If-None-Match'] = etag; }
    // no-store: the page does its own revalidation, and sees each 304 itself.
    fetch(url, { headers: headers, cache: 'no-store' })
      .then(function (response) {
        polls += 1;
        live.dataset.polls = String(polls);
        if (response.status === 304) { return null; }
        if (!response.ok) { throw new Error('the map feed answered ' + response.status); }
        etag = response.headers.get('ETag');
        etagUrl = url;
        return response.json();
      })
      .then(function (collection) {
        if (collection) { show(collection); }
        say(inView + (inView === 1 ? ' device' : ' devices') + ' in view · updated ' + new Date().toISOString().slice(11, 19) + ' UTC');
      })
      .catch(function (error) { say(error.message); })
      .then(schedule);
  }

  // What is drawn, for people's tools and the browser tests (a canvas has no element per
  // marker): each marker's device or cluster figures, fill and ring colour, and where it is in
  // the page's viewport.
  live.airqDrawn = function () {
    var box = live.getBoundingClientRect();
    var all = [];
    markers.forEach(function (marker) { all.push(marker); });
    return all.concat(groups).map(function (marker) {
      var point = map.latLngToContainerPoint(marker.getLatLng());
      var drawn = { fill: marker.options.fillColor, ring: marker.options.color, x: box.left + point.x, y: box.top + point.y };
      Object.keys(marker.airq).forEach(function (key) { drawn[key] = marker.airq[key]; });
      return drawn;
    });
  };

  map.on('moveend', poll);
  poll();
})();
