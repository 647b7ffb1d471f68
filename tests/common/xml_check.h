// tests/common/xml_check.h: whether the SVG and HTML pages the programs write are well-formed XML,
// as libxml2 (Debian libxml2-dev) parses them: one root element, tags nested and closed,
// attributes quoted and unique, only the predefined entities and character references, no raw
// '<' or '&' in text. The pages are written as XML (HTML5 accepts it), so they are parsed as such.
#pragma once
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <map>
#include <memory>
#include <string>

namespace engine::testing {

struct XmlCheck {
  bool ok = false;
  std::string error;  // libxml2's message and line when not well-formed
  std::string root;   // the root element's name
  // How many elements of each name there are ("g"), and of each name and class ("div.frame").
  std::map<std::string, int> counts;
};

namespace detail {

inline void count_elements(xmlNode* node, std::map<std::string, int>* counts) {
  for (; node != nullptr; node = node->next) {
    if (node->type != XML_ELEMENT_NODE) continue;
    const std::string name = reinterpret_cast<const char*>(node->name);
    ++(*counts)[name];
    if (xmlChar* cls = xmlGetProp(node, reinterpret_cast<const xmlChar*>("class"))) {
      std::string all = reinterpret_cast<const char*>(cls), c;
      xmlFree(cls);
      for (char ch : all + " ") {
        if (ch != ' ' && ch != '\t' && ch != '\n') {
          c += ch;
        } else if (!c.empty()) {
          ++(*counts)[name + "." + c];
          c.clear();
        }
      }
    }
    count_elements(node->children, counts);
  }
}

}  // namespace detail

inline XmlCheck check_xml(const std::string& text) {
  XmlCheck r;
  std::unique_ptr<xmlParserCtxt, void (*)(xmlParserCtxtPtr)> ctxt(xmlNewParserCtxt(),
                                                                  xmlFreeParserCtxt);
  if (!ctxt) {
    r.error = "libxml2: no parser context";
    return r;
  }
  std::unique_ptr<xmlDoc, void (*)(xmlDocPtr)> doc(
      xmlCtxtReadMemory(ctxt.get(), text.data(), static_cast<int>(text.size()), "page.xml", nullptr,
                        XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING),
      xmlFreeDoc);
  if (!doc || !ctxt->wellFormed) {
    const xmlError* e = xmlCtxtGetLastError(ctxt.get());
    r.error = e && e->message ? std::string(e->message) + " at line " + std::to_string(e->line)
                              : std::string("not well-formed");
    return r;
  }
  xmlNode* root = xmlDocGetRootElement(doc.get());
  if (root == nullptr) {
    r.error = "no root element";
    return r;
  }
  r.ok = true;
  r.root = reinterpret_cast<const char*>(root->name);
  detail::count_elements(root, &r.counts);
  return r;
}

}  // namespace engine::testing
