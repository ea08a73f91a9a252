#include <boost/test/unit_test.hpp>

#include "k8sbridge/conf/conf_file.h"

namespace conf = k8sbridge::conf;

BOOST_AUTO_TEST_SUITE(conf_file)

BOOST_AUTO_TEST_CASE(splits_pairs_comments_quotes_and_continuations) {
  auto lines = conf::LexConf(
      "# comment\n"
      "\n"
      "ClusterName=hpc1   # trailing comment\n"
      "  NodeGroup=gpu Nodes=w-[0-3] \\\n"
      "      PodTemplate=\"/etc/a b.yaml\"\n"
      "Extra='single # not a comment' Empty=\n"
      "Escaped=\"say \\\"hi\\\"\"\r\n",
      "k.conf");
  BOOST_REQUIRE_MESSAGE(lines.ok(), lines.status().ToString());
  BOOST_REQUIRE_EQUAL(lines->size(), 4u);
  BOOST_CHECK_EQUAL((*lines)[0].line, 3);
  BOOST_CHECK_EQUAL((*lines)[0].pairs[0].key, "ClusterName");
  BOOST_CHECK_EQUAL((*lines)[0].pairs[0].value, "hpc1");
  BOOST_CHECK_EQUAL((*lines)[1].line, 4);
  BOOST_REQUIRE_EQUAL((*lines)[1].pairs.size(), 3u);
  BOOST_CHECK_EQUAL((*lines)[1].pairs[0].column, 3);
  BOOST_CHECK_EQUAL((*lines)[1].pairs[2].value, "/etc/a b.yaml");
  BOOST_CHECK_EQUAL((*lines)[2].pairs[0].value, "single # not a comment");
  BOOST_CHECK_EQUAL((*lines)[2].pairs[1].value, "");
  BOOST_CHECK_EQUAL((*lines)[3].pairs[0].value, "say \"hi\"");
}

BOOST_AUTO_TEST_CASE(errors_name_file_line_column_and_fix) {
  auto r = conf::LexConf("A=1\n  Nodes w-1\n", "/etc/slurm/k8sbridge.conf");
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK_EQUAL(r.status().message(),
                    "/etc/slurm/k8sbridge.conf:2:3: 'Nodes' is not a Key=Value pair: write it as "
                    "Nodes=<value> (values with spaces go in double quotes)");
  r = conf::LexConf("X=\"open\n", "k.conf");
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK_EQUAL(r.status().message(),
                    "k.conf:1:3: the value of X opens a quote (\") that is never closed: add the "
                    "closing \" on the same line");
  r = conf::LexConf("=v\n", "k.conf");
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK_EQUAL(r.status().message(),
                    "k.conf:1:1: '=' without a key before it: write Key=Value");
  r = conf::LexConf("Selector=x=\"two words\"\n", "k.conf");
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK_EQUAL(r.status().message(),
                    "k.conf:1:12: a quote inside the value of Selector: quote the whole value, as "
                    "in Selector=\"a b\"");
  r = conf::LexConf("X=\"a\"b\n", "k.conf");
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK_EQUAL(
      r.status().message(),
      "k.conf:1:6: text right after the closing quote of X: put a space between pairs");
}

BOOST_AUTO_TEST_CASE(keys_and_hints) {
  BOOST_CHECK(conf::KeyEquals("nodegroup", "NodeGroup"));
  BOOST_CHECK(!conf::KeyEquals("NodeGroups", "NodeGroup"));
  BOOST_CHECK_EQUAL(conf::ClosestMatch("Namspace", {"Namespace", "Nodes"}), "Namespace");
  BOOST_CHECK_EQUAL(conf::ClosestMatch("qsp", {"QPS", "Burst"}), "QPS");
  BOOST_CHECK_EQUAL(conf::ClosestMatch("Completely", {"QPS", "Burst"}), "");
}

BOOST_AUTO_TEST_CASE(dns_labels_and_label_syntax) {
  BOOST_CHECK_EQUAL(conf::Dns1123LabelError("w-0"), "");
  BOOST_CHECK_EQUAL(conf::Dns1123LabelError("W-0"),
                    "it has the upper-case letter 'W'; only a-z, 0-9 and '-' are allowed");
  BOOST_CHECK_EQUAL(conf::Dns1123LabelError("gpu_01"),
                    "it has the character '_'; only a-z, 0-9 and '-' are allowed");
  BOOST_CHECK_EQUAL(conf::Dns1123LabelError("-w"), "it must start and end with a letter or digit");
  BOOST_CHECK_EQUAL(conf::Dns1123LabelError(std::string(64, 'a')),
                    "it is 64 characters long, at most 63 are allowed");
  BOOST_CHECK_EQUAL(conf::Dns1123LabelError(""), "it is empty");
  BOOST_CHECK_EQUAL(conf::LabelKeyError("nvidia.com/gpu.product"), "");
  BOOST_CHECK_EQUAL(conf::LabelKeyError("topology.kubernetes.io/zone"), "");
  BOOST_CHECK_EQUAL(conf::LabelKeyError("plain_key.x"), "");
  BOOST_CHECK_EQUAL(conf::LabelKeyError("Bad_Prefix/x"),
                    "the prefix 'Bad_Prefix' is not a DNS subdomain: part 'Bad_Prefix': it has "
                    "the upper-case letter 'B'; only a-z, 0-9 and '-' are allowed");
  BOOST_CHECK_EQUAL(conf::LabelKeyError("a/"), "the name part is empty");
  BOOST_CHECK_EQUAL(conf::LabelValueError("NVIDIA-H100-80GB-HBM3"), "");
  BOOST_CHECK_EQUAL(conf::LabelValueError("a b"),
                    "the value has the character ' '; only A-Z, a-z, 0-9, '-', '_' and '.' are "
                    "allowed");
}

BOOST_AUTO_TEST_SUITE_END()
