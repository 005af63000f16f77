/* The harvest's inner loop compiled: a page's images to its candidates, the same answers as
 * conceptual/harvest/pages.py's judge_images() (its definition, in Python), one call a page.
 *
 * Each step is the Python one written out: the page's document_base(), collapse() (a
 * whitespace run as one space, none at either end: " ".join(text.split())), strip_url(),
 * harvest/urls.py's Resolver fast path (the regex _FAST, matched by hand) with web_url()
 * called back for every other URL, the length cap, the in-page duplicate set, each other
 * image counted under its reason, records.candidate_id() (SHA-1 of "url\talt" in UTF-8,
 * surrogatepass, its first 20 hex digits) and the candidate dict, keys in the same order.
 * tests/unit/harvest/test_harvest_links.py holds the two to the same candidates and counts on the
 * web-platform-tests' URLs, generated pages and real alt-texts.
 *
 * Built by `make setup` (scripts/setup.sh) and by any install of the package (setup.py),
 * against OpenSSL 3's libcrypto (libssl-dev, requirements/apt.txt). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <openssl/evp.h>
#include <string.h>

/* SHA-1 by OpenSSL's libcrypto (the one Python's hashlib and ssl use): its SHA extensions
 * where the CPU has them, six times a portable C loop's speed. One context, reused under the
 * GIL (nothing here releases it). */
static EVP_MD *SHA1_MD;
static EVP_MD_CTX *SHA1_CTX;

static int sha1_text(PyObject *text) {
    Py_ssize_t n;
    const char *bytes = PyUnicode_AsUTF8AndSize(text, &n);
    if (bytes != NULL) return EVP_DigestUpdate(SHA1_CTX, bytes, (size_t)n) ? 0 : -1;
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
    PyErr_Clear();  /* a lone surrogate, which strict UTF-8 refuses: surrogatepass */
    PyObject *encoded = PyUnicode_AsEncodedString(text, "utf-8", "surrogatepass");
    if (encoded == NULL) return -1;
    int ok = EVP_DigestUpdate(SHA1_CTX, PyBytes_AS_STRING(encoded), (size_t)PyBytes_GET_SIZE(encoded));
    Py_DECREF(encoded);
    return ok ? 0 : -1;
}

/* candidate_id(url, alt): the first 20 hex digits of SHA-1("url\talt"). */
static PyObject *candidate_id(PyObject *url, PyObject *alt) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    char hex[20];
    if (!EVP_DigestInit_ex(SHA1_CTX, SHA1_MD, NULL) || sha1_text(url) < 0 ||
        !EVP_DigestUpdate(SHA1_CTX, "\t", 1) || sha1_text(alt) < 0 ||
        !EVP_DigestFinal_ex(SHA1_CTX, digest, NULL)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "OpenSSL's SHA-1 failed");
        return NULL;
    }
    for (int i = 0; i < 10; i++) {
        hex[2 * i] = "0123456789abcdef"[digest[i] >> 4];
        hex[2 * i + 1] = "0123456789abcdef"[digest[i] & 15];
    }
    return PyUnicode_FromStringAndSize(hex, 20);
}

/* Text --------------------------------------------------------------------------------- */

/* collapse(text): " ".join(text.split()), the text itself (a new reference) when that is it. */
static PyObject *collapse(PyObject *text) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (Py_UNICODE_ISSPACE(c) &&
            (c != ' ' || i == 0 || i == n - 1 || PyUnicode_READ(kind, data, i + 1) == ' ')) {
            PyObject *words = PyUnicode_Split(text, NULL, -1);
            if (words == NULL) return NULL;
            PyObject *space = PyUnicode_FromString(" ");
            PyObject *joined = space == NULL ? NULL : PyUnicode_Join(space, words);
            Py_XDECREF(space);
            Py_DECREF(words);
            return joined;
        }
    }
    return Py_NewRef(text);
}

static int is_ascii_whitespace(Py_UCS4 c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

/* strip_url(text): ASCII whitespace off both ends (a new reference). */
static PyObject *strip_url(PyObject *text) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t start = 0, end = PyUnicode_GET_LENGTH(text);
    while (start < end && is_ascii_whitespace(PyUnicode_READ(kind, data, start))) start++;
    while (end > start && is_ascii_whitespace(PyUnicode_READ(kind, data, end - 1))) end--;
    if (start == 0 && end == PyUnicode_GET_LENGTH(text)) return Py_NewRef(text);
    return PyUnicode_Substring(text, start, end);
}

/* The fast path: harvest/urls.py's _FAST, by hand --------------------------------------- */

enum form { NO_MATCH, SCHEME, PROTOCOL_RELATIVE, ROOT, RELATIVE };

/* _CHARS: the characters the standard writes as they are, anywhere in a reference. */
static int is_plain(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("-._~!$&()*+,;=@%[]", c) != NULL);
}

static int is_label_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* (?:LABEL\.)*(?!xn--)[a-z][a-z0-9-]*\.? with LABEL (?!xn--)[a-z0-9-]+, on s[0:n]: the text
 * between "//" and the next "/" (no punycode label, which the parser checks; the last label
 * starts with a letter, as one ending in a number is an IPv4 address). */
static int is_plain_host(const char *s, Py_ssize_t n) {
    if (n && s[n - 1] == '.') n--;  /* one dot may end it */
    if (n == 0) return 0;
    Py_ssize_t label = 0;  /* where the label being read starts */
    for (Py_ssize_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.') {
            if (!is_label_char((unsigned char)s[i])) return 0;
            continue;
        }
        if (i == label || (i - label >= 4 && memcmp(s + label, "xn--", 4) == 0)) return 0;
        if (i == n && !(s[label] >= 'a' && s[label] <= 'z')) return 0;
        label = i + 1;
    }
    return 1;
}

/* Which of _FAST's forms `url` (ASCII, s[0:n]) is, or NO_MATCH. */
static enum form fast_form(const char *s, Py_ssize_t n) {
    /* (?!.*(?:\./|%2[eE]|\.\?|\.\Z)): no dot segment, nor what could be one */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] == '.' && (i == n - 1 || s[i + 1] == '/' || s[i + 1] == '?')) return NO_MATCH;
        if (s[i] == '%' && i + 2 < n && s[i + 1] == '2' && (s[i + 2] == 'e' || s[i + 2] == 'E'))
            return NO_MATCH;
    }
    enum form form;
    Py_ssize_t rest;  /* where [_CHARS/?:]*\Z starts */
    Py_ssize_t scheme = n >= 6 && memcmp(s, "https:", 6) == 0 ? 6
                        : n >= 5 && memcmp(s, "http:", 5) == 0 ? 5 : 0;
    if (n - scheme >= 2 && s[scheme] == '/' && s[scheme + 1] == '/') {
        Py_ssize_t host = scheme + 2, end = host;
        while (end < n && s[end] != '/') end++;
        if (end == n || !is_plain_host(s + host, end - host)) return NO_MATCH;
        form = scheme ? SCHEME : PROTOCOL_RELATIVE;
        rest = end + 1;
    } else if (scheme) {  /* "http:" without "//": its first segment holds a colon */
        return NO_MATCH;
    } else if (n >= 1 && s[0] == '/') {
        form = ROOT, rest = 1;  /* "//" went the first way */
    } else {
        Py_ssize_t i = 0;
        while (i < n && is_plain((unsigned char)s[i])) i++;
        if (i == 0 || (i < n && s[i] != '/' && s[i] != '?')) return NO_MATCH;
        form = RELATIVE, rest = i;
    }
    for (Py_ssize_t i = rest; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!is_plain(c) && c != '/' && c != '?' && c != ':') return NO_MATCH;
    }
    return form;
}

/* A page's base (document_base()'s answer), as harvest/urls.py's Resolver reads it: its
 * origin when of the plain form (_ORIGIN: http(s)://, a host of [a-z0-9.-], then "/"), and
 * the directory of its path (up to its last "/" before a query or fragment). */
typedef struct {
    PyObject *origin;    /* "http://host", or NULL: every URL goes to web_url() */
    PyObject *in_directory;  /* origin + directory: a relative reference's prefix */
    PyObject *scheme;    /* "http:" or "https:": a protocol-relative reference's */
} base_parts;

static int read_base(PyObject *base, base_parts *parts) {
    parts->origin = parts->in_directory = parts->scheme = NULL;
    if (base == Py_None) return 0;
    if (!PyUnicode_Check(base)) {
        PyErr_SetString(PyExc_TypeError, "base must be a str or None");
        return -1;
    }
    int kind = PyUnicode_KIND(base);
    const void *data = PyUnicode_DATA(base);
    Py_ssize_t n = PyUnicode_GET_LENGTH(base), p = 0;
    static const char http[] = "http";
    for (; p < 4; p++)
        if (p >= n || PyUnicode_READ(kind, data, p) != (Py_UCS4)http[p]) return 0;
    if (p < n && PyUnicode_READ(kind, data, p) == 's') p++;
    if (p >= n || PyUnicode_READ(kind, data, p) != ':') return 0;
    Py_ssize_t scheme_end = ++p;
    if (p + 1 >= n || PyUnicode_READ(kind, data, p) != '/' || PyUnicode_READ(kind, data, p + 1) != '/')
        return 0;
    Py_ssize_t host = p += 2;
    while (p < n) {
        Py_UCS4 c = PyUnicode_READ(kind, data, p);
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) break;
        p++;
    }
    if (p == host || p >= n || PyUnicode_READ(kind, data, p) != '/') return 0;
    Py_ssize_t slash = p;  /* the path's last "/" before a query or fragment */
    for (Py_ssize_t i = p; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c == '?' || c == '#') break;
        if (c == '/') slash = i;
    }
    parts->origin = PyUnicode_Substring(base, 0, p);
    parts->in_directory = PyUnicode_Substring(base, 0, slash + 1);
    parts->scheme = PyUnicode_Substring(base, 0, scheme_end);
    if (parts->origin && parts->in_directory && parts->scheme) return 0;
    Py_CLEAR(parts->origin);
    Py_CLEAR(parts->in_directory);
    Py_CLEAR(parts->scheme);
    return -1;
}

/* Resolver(base)(url): the fast path's join, else web_url(url, base). A new reference: a
 * str, or None. */
static PyObject *resolve(PyObject *url, PyObject *base, const base_parts *parts, PyObject *web_url) {
    if (parts->origin != NULL && PyUnicode_IS_ASCII(url)) {
        const char *s = (const char *)PyUnicode_DATA(url);
        switch (fast_form(s, PyUnicode_GET_LENGTH(url))) {
            case SCHEME: return Py_NewRef(url);
            case PROTOCOL_RELATIVE: return PyUnicode_Concat(parts->scheme, url);
            case ROOT: return PyUnicode_Concat(parts->origin, url);
            case RELATIVE: return PyUnicode_Concat(parts->in_directory, url);
            case NO_MATCH: break;
        }
    }
    return PyObject_CallFunctionObjArgs(web_url, url, base, NULL);
}

/* The reasons (pages.py's IMAGE_REASONS) and the candidate's keys, interned once. */
static PyObject *NO_ALT, *EMPTY_ALT, *NO_URL, *NOT_HTTP, *TOO_LONG, *DUPLICATE_IN_PAGE;
static PyObject *ID, *IMAGE_URL, *PAGE_URL, *ALT_TEXT, *LANG;

static PyObject *candidate(PyObject *url, PyObject *alt, PyObject *page_url, PyObject *lang,
                           PyObject *provenance) {
    PyObject *row = PyDict_New(), *id = candidate_id(url, alt);
    if (row == NULL || id == NULL || PyDict_SetItem(row, ID, id) < 0 ||
        PyDict_SetItem(row, IMAGE_URL, url) < 0 || PyDict_SetItem(row, PAGE_URL, page_url) < 0 ||
        PyDict_SetItem(row, ALT_TEXT, alt) < 0 || PyDict_SetItem(row, LANG, lang) < 0 ||
        PyDict_Update(row, provenance) < 0) {
        Py_XDECREF(row), Py_XDECREF(id);
        return NULL;
    }
    Py_DECREF(id);
    return row;
}

/* One image's reason (a borrowed, interned str), or NULL with its candidate added to
 * `candidates` (or, *failed, an exception set). */
static PyObject *judge_image(PyObject *image, PyObject *base, const base_parts *parts,
                             PyObject *web_url, PyObject *page_url, PyObject *lang,
                             PyObject *provenance, Py_ssize_t max_chars, PyObject *seen,
                             PyObject *candidates, int *failed) {
    PyObject *reason = NULL, *alt = NULL, *raw = NULL, *url = NULL, *key = NULL, *row = NULL;
    *failed = 1;
    if (!PyTuple_Check(image) || PyTuple_GET_SIZE(image) != 2) {
        PyErr_SetString(PyExc_TypeError, "an image is an (alt, url) tuple");
        return NULL;
    }
    PyObject *alt_given = PyTuple_GET_ITEM(image, 0), *url_given = PyTuple_GET_ITEM(image, 1);
    if (alt_given == Py_None) {
        reason = NO_ALT;
        goto judged;
    }
    if (!PyUnicode_Check(alt_given) || (url_given != Py_None && !PyUnicode_Check(url_given))) {
        PyErr_SetString(PyExc_TypeError, "an image's alt and url are str or None");
        return NULL;
    }
    if ((alt = collapse(alt_given)) == NULL) goto done;
    if (PyUnicode_GET_LENGTH(alt) == 0) {
        reason = EMPTY_ALT;
        goto judged;
    }
    if (url_given == Py_None || PyUnicode_GET_LENGTH(url_given) == 0) {
        reason = NO_URL;
        goto judged;
    }
    if ((raw = strip_url(url_given)) == NULL) goto done;
    if (PyUnicode_GET_LENGTH(raw) == 0) {
        reason = NO_URL;
        goto judged;
    }
    if ((url = resolve(raw, base, parts, web_url)) == NULL) goto done;
    if (url == Py_None) {
        reason = NOT_HTTP;
        goto judged;
    }
    if (!PyUnicode_Check(url)) {
        PyErr_SetString(PyExc_TypeError, "web_url gave no str");
        goto done;
    }
    if (PyUnicode_GET_LENGTH(alt) > max_chars || PyUnicode_GET_LENGTH(url) > max_chars) {
        reason = TOO_LONG;
        goto judged;
    }
    if ((key = PyTuple_Pack(2, alt, url)) == NULL) goto done;
    int found = PySet_Contains(seen, key);
    if (found < 0) goto done;
    if (found) {
        reason = DUPLICATE_IN_PAGE;
        goto judged;
    }
    if (PySet_Add(seen, key) < 0) goto done;
    if ((row = candidate(url, alt, page_url, lang, provenance)) == NULL) goto done;
    if (PyList_Append(candidates, row) < 0) goto done;
judged:
    *failed = 0;
done:
    Py_XDECREF(alt), Py_XDECREF(raw), Py_XDECREF(url), Py_XDECREF(key), Py_XDECREF(row);
    return reason;
}

/* counts[reason] += 1, on a Counter (a dict) as Counter.update() counts. */
static int count(PyObject *counts, PyObject *reason) {
    PyObject *n = PyDict_GetItemWithError(counts, reason);
    if (n == NULL && PyErr_Occurred()) return -1;
    PyObject *one = PyLong_FromLong(1), *more = n == NULL ? Py_NewRef(one) : PyNumber_Add(n, one);
    int failed = more == NULL || PyDict_SetItem(counts, reason, more) < 0;
    Py_XDECREF(one), Py_XDECREF(more);
    return failed ? -1 : 0;
}

/* document_base(page_url, base_href), without the call for a page of a plain absolute URL
 * and no <base href> (most pages): the standard writes that URL as it is (urls.py's _href).
 * A new reference. */
static PyObject *page_base(PyObject *page_url, PyObject *base_href, PyObject *document_base) {
    if (base_href == Py_None && PyUnicode_IS_ASCII(page_url) &&
        fast_form((const char *)PyUnicode_DATA(page_url), PyUnicode_GET_LENGTH(page_url)) == SCHEME)
        return Py_NewRef(page_url);
    return PyObject_CallFunctionObjArgs(document_base, page_url, base_href, NULL);
}

static PyObject *page_candidates(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *images, *page_url, *base_href, *lang, *provenance, *counts, *document_base, *web_url;
    Py_ssize_t max_chars;
    if (!PyArg_ParseTuple(args, "nOOO!UOOO!O!:candidates", &max_chars, &document_base, &web_url,
                          &PyList_Type, &images, &page_url, &base_href, &lang, &PyDict_Type,
                          &provenance, &PyDict_Type, &counts))
        return NULL;
    PyObject *base = page_base(page_url, base_href, document_base);
    if (base == NULL) return NULL;
    base_parts parts;
    if (read_base(base, &parts) < 0) {
        Py_DECREF(base);
        return NULL;
    }
    PyObject *seen = PySet_New(NULL), *candidates = PyList_New(0), *result = NULL;
    if (seen == NULL || candidates == NULL) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(images); i++) {
        int failed;
        PyObject *reason = judge_image(PyList_GET_ITEM(images, i), base, &parts, web_url,
                                       page_url, lang, provenance, max_chars, seen, candidates,
                                       &failed);
        if (failed || (reason != NULL && count(counts, reason) < 0)) goto done;
    }
    result = Py_NewRef(candidates);
done:
    Py_XDECREF(seen), Py_XDECREF(candidates), Py_DECREF(base);
    Py_XDECREF(parts.origin), Py_XDECREF(parts.in_directory), Py_XDECREF(parts.scheme);
    return result;
}

static PyMethodDef methods[] = {
    {"candidates", page_candidates, METH_VARARGS,
     "candidates(max_chars, document_base, web_url, images, page_url, base_href, lang, "
     "provenance, counts) -> candidates: pages.judge_images(), compiled."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_links", NULL, -1, methods};

PyMODINIT_FUNC PyInit__links(void) {
    struct { PyObject **name; const char *text; } names[] = {
        {&NO_ALT, "no_alt"}, {&EMPTY_ALT, "empty_alt"}, {&NO_URL, "no_url"},
        {&NOT_HTTP, "not_http"}, {&TOO_LONG, "too_long"}, {&DUPLICATE_IN_PAGE, "duplicate_in_page"},
        {&ID, "id"}, {&IMAGE_URL, "image_url"}, {&PAGE_URL, "page_url"}, {&ALT_TEXT, "alt_text"},
        {&LANG, "lang"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*names[i].name = PyUnicode_InternFromString(names[i].text)) == NULL) return NULL;
    if ((SHA1_MD = EVP_MD_fetch(NULL, "SHA1", NULL)) == NULL || (SHA1_CTX = EVP_MD_CTX_new()) == NULL) {
        PyErr_SetString(PyExc_ImportError, "OpenSSL's libcrypto has no SHA-1");
        return NULL;
    }
    return PyModule_Create(&module);
}
