// json-server middleware of the real-vendor tier: the same API under /c/<client>/..., and
// one line per answered request with the URL as the client sent it, so the tier can count
// each poller's requests at the vendor.
const fs = require("fs");

const file = process.env.RV_ACCESS_LOG;
const prefix = /^\/c\/[^/]+(\/.*)$/;

module.exports = (req, res, next) => {
  const sent = req.url;
  res.on("finish", () => {
    fs.appendFileSync(file, `${req.method} ${sent} ${res.statusCode}\n`);
  });
  const routed = prefix.exec(req.url);
  if (routed) {
    req.url = routed[1];
  }
  next();
};
